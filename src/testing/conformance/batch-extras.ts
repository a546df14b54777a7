/**
 * S9: what a batch carries besides events (a claimed lease, a released lease, a snapshot, a
 * notice) takes effect in its transaction, and only when the batch is appended. S10: a notice is
 * taken once, by its owner.
 */
import { describe, expect, it } from "./vitest.ts";
import { initialState } from "../../fold/state.ts";
import {
  appendOne,
  batch,
  envelopes,
  expectAllOk,
  expectRefused,
  start,
  T0,
  TTL_MS,
  type Harness,
} from "./helpers.ts";

const stateJson = (seq: number) => JSON.stringify({ ...initialState("a"), seq });

export function batchExtrasSuite(h: Harness): void {
  describe("batch extras (S9)", () => {
    leaseExtraTests(h);
    snapshotAndNoticeExtraTests(h);
  });
}

/** S9: a lease claimed or released with a batch. */
function leaseExtraTests(h: Harness): void {
  it("claims a lease at fence 1 with the first batch when none exists", async () => {
    const store = await h.open();
    const claimLease = { owner: "w1", expiresAtMs: T0 + TTL_MS };
    expectAllOk(await store.appendMany([batch(envelopes("a", 0, 1), 1, { claimLease })]));
    expect(await store.getLease("a")).toEqual({
      executionId: "a",
      owner: "w1",
      fence: 1,
      expiresAtMs: T0 + TTL_MS,
    });
    expect(await store.acquireLease("a", "w2", { ttlMs: TTL_MS, nowMs: T0 })).toBeUndefined();
  });

  it("a claim is fenced when a lease row exists, and a refused claim creates nothing", async () => {
    const store = await h.open();
    await store.acquireLease("a", "w2", { ttlMs: TTL_MS, nowMs: T0 });
    const claimLease = { owner: "w1", expiresAtMs: T0 + TTL_MS };
    const b = batch(envelopes("a", 0, 1), 2, { claimLease });
    expectRefused(await appendOne(store, b), "LOOM_FENCED");
    expect((await store.getLease("a"))?.owner).toBe("w2");
    expectRefused(
      await appendOne(store, batch(envelopes("b", 0, 1), 2, { claimLease })),
      "LOOM_FENCED",
    );
    expect(await store.getLease("b")).toBeUndefined();
    expect(await store.head("b")).toBe(-1);
  });

  it("releases the lease with the batch, only for its owner at its fence", async () => {
    const store = await h.open();
    const fence = await start(store, "a", { owner: "w1" });
    expectAllOk(
      await store.appendMany([batch(envelopes("a", 1, 1), fence, { releaseLease: "other" })]),
    );
    expect((await store.getLease("a"))?.owner).toBe("w1");
    expectAllOk(
      await store.appendMany([batch(envelopes("a", 2, 1), fence, { releaseLease: "w1" })]),
    );
    expect((await store.getLease("a"))?.owner).toBeUndefined();
  });
}

/** S9: a snapshot saved with a batch; S10: a notice posted with one, taken once by its owner. */
function snapshotAndNoticeExtraTests(h: Harness): void {
  it("saves a batch's snapshot with it, never over a newer one, and not when refused", async () => {
    const store = await h.open();
    const fence = await start(store, "a", { count: 3 });
    expectAllOk(
      await store.appendMany([
        batch(envelopes("a", 3, 1), fence, { snapshot: { seq: 3, stateJson: stateJson(3) } }),
      ]),
    );
    expect((await store.loadSnapshot("a"))?.seq).toBe(3);
    expect((await store.loadSnapshot("a"))?.state.seq).toBe(3);
    await store.saveSnapshot("a", { seq: 9, state: { ...initialState("a"), seq: 9 } });
    expectAllOk(
      await store.appendMany([
        batch(envelopes("a", 4, 1), fence, { snapshot: { seq: 4, stateJson: stateJson(4) } }),
      ]),
    );
    expect((await store.loadSnapshot("a"))?.seq).toBe(9);
    const stale = batch(envelopes("a", 2, 1), fence, {
      snapshot: { seq: 20, stateJson: stateJson(20) },
    });
    expectRefused(await appendOne(store, stale), "LOOM_SEQUENCE_CONFLICT");
    expect((await store.loadSnapshot("a"))?.seq).toBe(9);
  });
  it("posts a notice with the batch; its owner takes it once, no one else sees it (S10)", async () => {
    const store = await h.open();
    const fence = await start(store, "a", { owner: "w1" });
    expect(await store.takeNotices("w2")).toEqual([]);
    const notice = { owner: "w2", kind: "cancel" as const };
    const posted = envelopes("a", 1, 1);
    expectAllOk(await store.appendMany([batch(posted, fence, { notice })]));
    expect(await store.takeNotices("w1")).toEqual([]);
    expect(await store.takeNotices("w2")).toEqual([
      { executionId: "a", kind: "cancel", atMs: posted[0]?.at },
    ]);
    expect(await store.takeNotices("w2")).toEqual([]);
  });

  it("a refused batch posts no notice (S9)", async () => {
    const store = await h.open();
    const fence = await start(store, "a", { owner: "w1" });
    const notice = { owner: "w2", kind: "cancel" as const };
    expectRefused(
      await appendOne(store, batch(envelopes("a", 1, 1), fence + 1, { notice })),
      "LOOM_FENCED",
    );
    expect(await store.takeNotices("w2")).toEqual([]);
  });
}
