/**
 * Queues through the sealing store (trust/sealed-store.ts): a batch's queue entry reaches the
 * store in the clear (docs/trust.md), admissions go through the wrapper (which notes their leases
 * as a claim's, V5), and the audit chain of an execution admitted twice still links.
 */
import { describe, expect, it } from "vitest";
import { memoryStore } from "../src/store/memory/index.ts";
import { sealStore } from "../src/trust/sealed-store.ts";
import { batch, envelope, FLOW, T0 } from "../src/testing/conformance/helpers.ts";

const clock = { now: () => T0 };
const ADMIT = { queue: "q", limits: {}, flows: [FLOW], limit: 5, ttlMs: 10, nowMs: T0 };

describe("sealed store: queues", () => {
  it("passes a queue entry through in the clear, and admits through the wrapper", async () => {
    const inner = memoryStore();
    const store = sealStore(inner, { audit: true, clock });
    const first = batch([envelope("x1", 0)], 1, {
      status: "queued",
      queue: { name: "q", priority: 2, key: "user-1", dedupe: "d" },
      claimLease: { owner: "recorder", expiresAtMs: T0 + 10 },
      releaseLease: "recorder",
    });
    expect((await store.appendMany([first]))[0]?.ok).toBe(true);
    const view = await inner.queueView("q", { nowMs: T0, limit: 5 });
    expect(view.waiting).toEqual([
      { executionId: "x1", flow: FLOW, key: "user-1", priority: 2, createdAtMs: T0 },
    ]);
    expect((await store.list())[0]?.queue).toBe("q");
    // Another process admits it and lets the lease expire; this one admits it again at fence 3.
    const other = sealStore(inner.reopen(), { audit: true, clock });
    expect((await other.admitQueued("w2", ADMIT)).map((a) => a.fence)).toEqual([2]);
    const [again] = await store.admitQueued("w1", { ...ADMIT, nowMs: T0 + 10 });
    expect(again?.fence).toBe(3);
    const admitted = batch([envelope("x1", 1, "EXECUTION_ADMITTED")], 3);
    expect((await store.appendMany([admitted]))[0]?.ok).toBe(true);
    const [e0, e1] = await inner.read("x1");
    // The chain links to what the store holds (V5).
    expect(e1?.meta?.prev).toBeDefined();
    expect(e1?.meta?.prev).toBe(e0?.meta?.hash);
  });
});
