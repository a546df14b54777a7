/**
 * Red team (issue 22 item 6, ADR 0111): a principal's verb may not reach another principal's
 * execution, also when it races the owner's start (authorization read before the execution exists).
 */
import { describe, expect, it } from "vitest";
import { flow$, isLoomError, memoryStore, type Store } from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();

const twoStep = flow$("two-step", async (ctx, input: { who: string }) => {
  const a = await ctx.run("a", () => `a of ${input.who}`);
  const msg = await ctx.suspend<string>();
  return { a, msg };
});

/** A store whose first read of `id`'s sequence 0 answers, then waits for `gate` before returning. */
function gatedFirstRead(store: Store, id: string, gate: Promise<void>): Store {
  let first = true;
  return {
    ...store,
    read: async (x, from, limit) => {
      const rows = await store.read(x, from, limit);
      if (x === id && from === 0 && first) {
        first = false;
        await gate;
      }
      return rows;
    },
  };
}

/**
 * Mallory restores "x" from a state of her own with a planted value, her authorization held at
 * its first read of "x" while alice starts "x"; then the gate opens.
 */
async function raceRestore() {
  const store = memoryStore();
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const alice = rt(store).registerFlow(twoStep);
  const mallory = rt(gatedFirstRead(store, "x", gate)).registerFlow(twoStep);
  // Mallory's own execution gives her a state to restore with.
  await mallory.start(twoStep, { who: "mallory" }, { id: "m", principal: "mallory" });
  await until(async () => (await mallory.getState("m", { as: "mallory" })).status === "parked");
  const forged = await mallory.getState("m", { as: "mallory" });
  const frame = Object.values(forged.frames).find((f) => f.name === "a");
  if (frame) frame.output = "PLANTED BY MALLORY";
  const attack = mallory.restoreFromState("x", "two-step", forged, { as: "mallory" }).then(
    () => "no error",
    (e: unknown) => (isLoomError(e) ? e.code : String(e)),
  );
  await new Promise((r) => setTimeout(r, 50));
  // Alice starts "x" while mallory's authorization has already read "no log".
  const h = await alice.start(twoStep, { who: "alice" }, { id: "x", principal: "alice" });
  await until(async () => (await alice.getState("x", { as: "alice" })).status === "parked");
  open();
  const outcomeOfAttack = await attack;
  const kinds = (await alice.readLog("x", { as: "alice" })).map((e) => e.kind);
  return { alice, h, outcomeOfAttack, kinds };
}

describe("red team: principals race the owner's start", () => {
  it("mallory's restoreFromState racing alice's start of the same id may not rewrite alice's execution", async () => {
    const { alice, h, outcomeOfAttack, kinds } = await raceRestore();
    expect(kinds).not.toContain("STATE_RESTORED");
    expect(outcomeOfAttack).not.toBe("no error");
    await alice.resume("x", "hi", { as: "alice" });
    expect((await h.result()).output).toEqual({ a: "a of alice", msg: "hi" });
  });
  it("the harm: after mallory's racing restore, alice's own run returns what mallory planted", async () => {
    const { alice, h } = await raceRestore();
    await alice.resume("x", "hi", { as: "alice" });
    expect((await h.result()).output).toEqual({ a: "a of alice", msg: "hi" });
  });
});
