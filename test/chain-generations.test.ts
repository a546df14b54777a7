/**
 * Chain generations past the first (ADR 0109): a fork of a later generation leaves the chain
 * (D7, the seed's named test "fork chain~2, cancel chain~1"), and a successor runs the code
 * registered when it starts, not the code its chain started under (D3).
 */
import { describe, expect, it } from "vitest";
import {
  flow$,
  memoryStore,
  type AppendBatch,
  type FlowContext,
  type Runtime,
} from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";
import { waitForGeneration } from "./support/chains.ts";

const rt = runtimes();
const chains = { features: { continueAsNew: true } };
const parked = (r: Runtime, id: string) =>
  until(async () => (await r.getState(id)).status === "parked");

/** Rotates at once up to generation 2; generations 2 and 3 rotate after a message; 4 waits. */
const member = flow$("gen-member", async (ctx, carry: { gen: number } | null) => {
  const gen = carry?.gen ?? 0;
  if (gen < 2) return ctx.continueAsNew({ gen: gen + 1 });
  const heard = await ctx.receive<string>();
  if (gen < 4) return ctx.continueAsNew({ gen: gen + 1 });
  return { gen, heard };
});

describe("a fork of a later generation (ADR 0109 D7, D2)", () => {
  it("D7, D2: fork chain~2, cancel chain~1; the fork is not cancelled, and a head probe of the fork resolves to the fork", async () => {
    const r = rt(memoryStore(), chains).registerFlow(member);
    await r.start(member, null, { id: "fk" });
    await waitForGeneration(r, "fk", 2);
    await parked(r, "fk~2");
    await r.fork("fk~2", (await r.readLog("fk~2")).length - 1, "fk-fork");
    // The chain goes on past the generation forked: fk~3, then fk~4, its head.
    await r.send("fk", "a");
    await waitForGeneration(r, "fk", 3);
    await parked(r, "fk~3");
    await r.send("fk", "b");
    await waitForGeneration(r, "fk", 4);
    await parked(r, "fk~4");

    expect(await r.cancel("fk~1", "stop the chain")).toBe(true);
    expect((await r.getState("fk~4")).status).toBe("cancelled");
    // The fork copied fk~2's sequence 0 (which names fk~1 as its predecessor) yet is a chain of
    // its own: the cancel did not reach it, and it routes to itself, not to fk~4.
    expect((await r.getState("fk-fork")).status).toBe("parked");
    expect(await r.followToHead("fk-fork")).toBe("fk-fork");
    expect((await r.getState("fk-fork"))._chain).toEqual({ chainId: "fk-fork", generation: 0 });
    await r.send("fk-fork", "to the fork");
    await waitForGeneration(r, "fk-fork", 1);
    expect(await r.followToHead("fk-fork")).toBe("fk-fork~1");
  });

  it("D7, K4: a fork of a successor whose predecessor was cancelled in the rotation is not cascaded", async () => {
    const data = memoryStore();
    // Holds the start of fk2~2 (the second rotation), so fk2~1 can be cancelled in its window.
    let release: () => void = () => undefined;
    let reached: () => void = () => undefined;
    const isHeld = new Promise<void>((r) => (reached = r));
    const store = new Proxy(data, {
      get(target, key, receiver) {
        if (key !== "appendMany") return Reflect.get(target, key, receiver) as unknown;
        return async (batches: AppendBatch[]) => {
          if (batches.some((b) => b.executionId === "fk2~2" && b.expectedSeq === 0)) {
            reached();
            await new Promise<void>((r) => (release = r));
          }
          return target.appendMany(batches);
        };
      },
    });
    const a = rt(data.reopen(), { ...chains, store }).registerFlow(member);
    await a.start(member, null, { id: "fk2" });
    await isHeld;
    const b = rt(data.reopen(), chains).registerFlow(member);
    expect(await b.cancel("fk2~1", "stop")).toBe(true);
    release();
    // fk2~2's start lands after its predecessor's cancel: it cancels itself (K4).
    await until(async () => (await b.getState("fk2~2").catch(() => null))?.status === "cancelled");
    expect((await b.getState("fk2~1")).status).toBe("cancelled");

    // A fork of fk2~2 from its sequence 0 runs: its copied continuedFrom is not its chain.
    await b.fork("fk2~2", 0, "fk2-fork");
    await parked(b, "fk2-fork");
    expect(await b.followToHead("fk2-fork")).toBe("fk2-fork");
    await b.send("fk2-fork", "go");
    await waitForGeneration(b, "fk2-fork", 1);
  });
});

type Carry = { gen: number; heard: string[] } | null;

/** Version 1: generation 0 rotates after a message; a successor answers with its code. */
const v1 = flow$(
  "evolving",
  async (ctx, input: Carry) => {
    const gen = input?.gen ?? 0;
    const heard = [...(input?.heard ?? []), await ctx.receive<string>()];
    if (gen === 0) return ctx.continueAsNew({ gen: 1, heard });
    return { code: "v1", gen, heard };
  },
  { version: "1" },
);

/** Version 2: the same calls, another answer. */
const v2Body = async (ctx: FlowContext, input: Carry) => {
  const gen = input?.gen ?? 0;
  const heard = [...(input?.heard ?? []), await ctx.receive<string>()];
  if (gen === 0) return ctx.continueAsNew({ gen: 1, heard });
  return { code: "v2", gen, heard };
};

describe("a successor runs the code registered now (ADR 0109 D3)", () => {
  it("D3: a chain started under version 1 rotates after version 2 is deployed; the successor records and runs version 2", async () => {
    const data = memoryStore();
    const a = rt(data.reopen(), chains).registerFlow(v1);
    await a.start(v1, null, { id: "ev" });
    await parked(a, "ev");
    await a.close();

    // The deploy: version 2, which can still replay version 1's generation.
    const v2 = flow$("evolving", v2Body, { version: "2", compatibleVersions: ["1"] });
    const b = rt(data.reopen(), chains).registerFlow(v2);
    await b.send("ev", "one");
    await waitForGeneration(b, "ev", 1);
    await parked(b, "ev~1");
    const [first] = await b.readLog("ev");
    const [successor] = await b.readLog("ev~1");
    expect(first?.payload).toMatchObject({ flowVersion: "1", fingerprint: v1.fingerprint });
    expect(successor?.payload).toMatchObject({ flowVersion: "2", fingerprint: v2.fingerprint });
    await b.close();

    // Version 1 retired: a runtime with only version 2 drives the successor.
    const only2 = flow$("evolving", v2Body, { version: "2" });
    const c = rt(data.reopen(), chains).registerFlow(only2);
    await c.send("ev", "two");
    expect((await c.waitForCompletion("ev~1")).output).toEqual({
      code: "v2",
      gen: 1,
      heard: ["one", "two"],
    });
  });
});
