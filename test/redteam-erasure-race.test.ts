/**
 * Red team (ADR 0111, docs/security.md: eraseSubject `as` a principal "refuses an execution that
 * belongs to another principal"; verbs-trust.ts: "only when every execution holding the subject's
 * data is that principal's"): an execution of alice's that starts with the subject while mallory's
 * erasure is between its last index read and the key's destruction must not lose its data to it.
 */
import { describe, expect, it } from "vitest";
import { afterEach } from "vitest";
import {
  createRuntime,
  flow$,
  isLoomError,
  memoryStore,
  type Runtime,
  type Store,
} from "../src/index.ts";
import { until } from "./helpers.ts";

const open_: Runtime[] = [];
afterEach(async () => {
  await Promise.all(open_.splice(0).map((r) => r.close().catch(() => undefined)));
});
const rt = (store: Store): Runtime => {
  const r = createRuntime({ store, closeStore: false, pollIntervalMs: 20 });
  open_.push(r);
  return r;
};

const holds = flow$("holds", async (ctx, input: { card: string }) => {
  const r = await ctx.suspend<string>();
  return `${input.card}:${r}`;
});

describe("red team: erasure races a start", () => {
  it("mallory's erasure does not destroy the data of alice's execution started during it", async () => {
    const store = memoryStore();
    let reached!: () => void;
    const atDestroy = new Promise<void>((r) => (reached = r));
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const gated: Store = {
      ...store,
      destroyKey: async (keyId) => {
        reached();
        await gate;
        return store.destroyKey(keyId);
      },
    };
    const alice = rt(store).registerFlow(holds);
    const mallory = rt(gated).registerFlow(holds);
    await mallory.start(holds, { card: "mallory-card" }, { id: "m1", subject: "dave", principal: "mallory" });
    await until(async () => (await mallory.getState("m1", { as: "mallory" })).status === "parked");
    const erasure = mallory.eraseSubject("dave", { as: "mallory" }).then(
      (e) => `erased ${JSON.stringify(e.executions)}`,
      (e: unknown) => (isLoomError(e) ? e.code : String(e)),
    );
    await atDestroy;
    // Alice's execution for the same subject starts now, after the erasure's last index read.
    await alice.start(holds, { card: "ALICE-CARD" }, { id: "a1", subject: "dave", principal: "alice" });
    await until(async () => (await alice.getState("a1", { as: "alice" })).status === "parked");
    open();
    const outcome = await erasure;
    // Either mallory's erasure is refused (alice holds the subject's data), or alice's data stands.
    // Read back by a fresh runtime (alice's own holds the state in memory).
    const reader = rt(store).registerFlow(holds);
    const input = await reader.getState("a1", { as: "alice" }).then(
      (s) => s.input,
      (e: unknown) => (isLoomError(e) ? e.code : String(e)),
    );
    expect({ outcome, input }).toMatchObject({ input: { card: "ALICE-CARD" } });
  });
});
