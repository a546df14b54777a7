/**
 * A dispatch on a broken chain (ADR 0109 fix round 3 (3), D6): `LocalWorkerRuntime` follows a
 * continued execution to its head and reports the head's outcome; when routing cannot reach the
 * head (a link that fails verification more than `maxChainHops` away, or a missing successor) the
 * dispatch is a failed one, naming the furthest verified generation (worker-runtime.ts S6), never a
 * rejection and never `continued`.
 */
import { describe, expect, it } from "vitest";
import { createRuntime, flow$, LocalWorkerRuntime, memoryStore } from "../src/index.ts";
import { runtimes } from "./helpers.ts";
import { forge, waitForGeneration } from "./support/chains.ts";

const rt = runtimes();
const chains = { features: { continueAsNew: true } };

/** Rotates until generation `n`, which waits for a message. */
const hops = (n: number) =>
  flow$("hops", async (ctx, input: { gen: number } | null) => {
    const gen = input?.gen ?? 0;
    if (gen < n) return ctx.continueAsNew({ gen: gen + 1 });
    return ctx.receive<string>();
  });

describe("LocalWorkerRuntime on a broken chain (ADR 0109 fix round 3 (3), worker-runtime.ts S6)", () => {
  it("fix round 3 (3), S6: a head past maxChainHops of unverified ground is a failed dispatch naming the furthest verified id", async () => {
    const store = memoryStore();
    const f = hops(11);
    const r = rt(store, chains).registerFlow(f);
    await r.start(f, null, { id: "bc" });
    await waitForGeneration(r, "bc", 11);
    // A deepest generation that fails verification (another owner): routing falls back to the
    // verified walk from the first id, 11 steps, more than 8.
    await forge(store, "bc~12", {
      flow: "hops",
      flowVersion: "1",
      fingerprint: "x",
      schemaVersion: "1.5.0",
      chainId: "bc",
      generation: 12,
      continuedFrom: { executionId: "bc~11", carried: {} },
      principal: "mallory",
    });
    const fresh = rt(store, { ...chains, maxChainHops: 8, background: false }).registerFlow(f);
    const local = new LocalWorkerRuntime(fresh);
    const outcome = await local.dispatch({ executionId: "bc", flow: "hops", input: null });
    expect(outcome).toMatchObject({
      status: "failed",
      error: { code: "LOOM_CHAIN_HOP_LIMIT", details: { from: "bc", furthest: "bc~8" } },
    });
    expect(await local.outcome("bc~2")).toMatchObject({ status: "failed" });
    // Nothing was appended to any generation: the chain itself is as it was.
    expect((await r.getState("bc~11")).status).toBe("parked");
  });

  it("fix round 3 (3), D6, S6: a continued generation whose successor is missing is a failed dispatch, not continued", async () => {
    const store = memoryStore();
    const f = hops(3);
    const r = rt(store, chains).registerFlow(f);
    await r.start(f, null, { id: "gc" });
    await waitForGeneration(r, "gc", 3);
    // A store that lost generation 2 (as a retention gap would).
    const holed = new Proxy(store, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (key !== "read" && key !== "head") return v;
        return (id: string, ...rest: unknown[]) =>
          id === "gc~2"
            ? Promise.resolve(key === "head" ? -1 : [])
            : (v as (...a: unknown[]) => unknown).apply(target, [id, ...rest]);
      },
    });
    // Not through the suite's runtimes: its after-test replay check would read the holed store.
    const other = createRuntime({ store: holed, closeStore: false, background: false, ...chains });
    try {
      other.registerFlow(f);
      const local = new LocalWorkerRuntime(other);
      const outcome = await local.dispatch({ executionId: "gc", flow: "hops", input: null });
      expect(outcome).toMatchObject({
        status: "failed",
        error: { code: "LOOM_CHAIN_HOP_LIMIT", details: { from: "gc", furthest: "gc~1" } },
      });
    } finally {
      await other.close();
    }
    expect((await r.getState("gc~3")).status).toBe("parked");
  });
});
