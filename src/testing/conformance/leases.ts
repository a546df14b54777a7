/**
 * S6: the lease is a compare-and-set judged by the caller's clock, with a fence that every
 * acquire increments. S3: an append is refused unless it carries the lease's current fence.
 */
import { describe, expect, it } from "./vitest.ts";
import {
  acquire,
  appendOne,
  batch,
  envelopes,
  expectRefused,
  start,
  T0,
  TTL_MS,
  visible,
  type Harness,
} from "./helpers.ts";

const opts = (nowMs: number, takeoverFence?: number) =>
  takeoverFence === undefined ? { ttlMs: TTL_MS, nowMs } : { ttlMs: TTL_MS, nowMs, takeoverFence };

export function leaseSuite(h: Harness): void {
  describe("leases (S6)", () => {
    acquireTests(h);
    fenceRenewAndReleaseTests(h);
  });

  describe("fencing (S3)", () => {
    fencingTests(h);
  });
}

/** S6: who gets the lease, judged by the caller's clock. */
function acquireTests(h: Harness): void {
  it("acquire on a free id gives fence 1, expiring at the caller's now + ttl", async () => {
    const store = await h.open();
    expect(await store.getLease("a")).toBeUndefined();
    const lease = await store.acquireLease("a", "w1", opts(T0));
    const expected = { executionId: "a", owner: "w1", fence: 1, expiresAtMs: T0 + TTL_MS };
    expect(lease).toEqual(expected);
    expect(await store.getLease("a")).toEqual(expected);
    expect(await store.getLease("b")).toBeUndefined();
  });

  it("refuses a second owner while unexpired, by the caller's clock, not the store's", async () => {
    const store = await h.open();
    await acquire(store, "a", "w1", T0);
    // T0 is long past by the wall clock: only the caller's nowMs may decide expiry.
    expect(await store.acquireLease("a", "w2", opts(T0 + TTL_MS - 1))).toBeUndefined();
    expect(await store.getLease("a")).toMatchObject({ owner: "w1", fence: 1 });
    const future = 4_000_000_000_000;
    await acquire(store, "b", "w1", future);
    expect(await store.acquireLease("b", "w2", opts(future + 1))).toBeUndefined();
    expect(await store.acquireLease("b", "w2", opts(future + TTL_MS))).toMatchObject({
      owner: "w2",
      fence: 2,
    });
  });

  it("gives an expired lease to another owner with the next fence", async () => {
    const store = await h.open();
    await acquire(store, "a", "w1", T0);
    const later = T0 + TTL_MS + 5;
    const lease = await store.acquireLease("a", "w2", opts(later));
    expect(lease).toEqual({
      executionId: "a",
      owner: "w2",
      fence: 2,
      expiresAtMs: later + TTL_MS,
    });
    expect(await store.getLease("a")).toEqual(lease);
  });

  it("takes over a live lease only at its current fence", async () => {
    const store = await h.open();
    await acquire(store, "a", "w1", T0);
    expect(await store.acquireLease("a", "w2", opts(T0, 2))).toBeUndefined();
    expect(await store.acquireLease("a", "w2", opts(T0, 0))).toBeUndefined();
    expect(await store.getLease("a")).toMatchObject({ owner: "w1", fence: 1 });
    expect(await store.acquireLease("a", "w2", opts(T0, 1))).toMatchObject({
      owner: "w2",
      fence: 2,
    });
    expect(await store.acquireLease("a", "w3", opts(T0, 1))).toBeUndefined();
    expect(await store.acquireLease("a", "w3", opts(T0, 2))).toMatchObject({
      owner: "w3",
      fence: 3,
    });
  });
}

/** S6: the fence every acquire increments; renewal and release by the owner only. */
function fenceRenewAndReleaseTests(h: Harness): void {
  it("increments the fence on every successful acquire: free, released, expired, taken over", async () => {
    const store = await h.open();
    const fences = [(await acquire(store, "a", "w1", T0)).fence];
    await store.releaseLease("a", "w1", 1);
    fences.push((await acquire(store, "a", "w1", T0)).fence);
    fences.push((await acquire(store, "a", "w2", T0 + TTL_MS)).fence);
    const taken = await store.acquireLease("a", "w3", opts(T0 + TTL_MS, 3));
    fences.push(taken?.fence ?? -1);
    expect(fences).toEqual([1, 2, 3, 4]);
    expect(await store.getLease("a")).toMatchObject({ owner: "w3", fence: 4 });
    expect((await acquire(store, "b")).fence).toBe(1);
  });

  it("renews only the current owner's lease at its fence", async () => {
    const store = await h.open();
    await acquire(store, "a", "w1", T0);
    expect(await store.renewLease("a", "w1", 1, opts(T0 + 1000))).toBe(true);
    expect(await store.getLease("a")).toMatchObject({
      fence: 1,
      expiresAtMs: T0 + 1000 + TTL_MS,
    });
    // The renewal counts: at the old expiry the lease is still held.
    expect(await store.acquireLease("a", "w2", opts(T0 + TTL_MS))).toBeUndefined();
    expect(await store.renewLease("a", "w2", 1, opts(T0))).toBe(false);
    expect(await store.renewLease("a", "w1", 2, opts(T0))).toBe(false);
    expect(await store.renewLease("b", "w1", 1, opts(T0))).toBe(false);
    await acquire(store, "a", "w2", T0 + 2 * TTL_MS);
    expect(await store.renewLease("a", "w1", 1, opts(T0 + 2 * TTL_MS))).toBe(false);
    expect(await store.getLease("a")).toMatchObject({ owner: "w2", fence: 2 });
  });

  it("release frees the lease for another owner; a stale release changes nothing", async () => {
    const store = await h.open();
    await acquire(store, "a", "w1", T0);
    await store.releaseLease("a", "w2", 1);
    await store.releaseLease("a", "w1", 2);
    expect(await store.getLease("a")).toMatchObject({ owner: "w1", fence: 1 });
    await store.releaseLease("a", "w1", 1);
    const released = await store.getLease("a");
    expect(released?.owner).toBeUndefined();
    expect(released?.fence).toBe(1);
    expect(await store.renewLease("a", "w1", 1, opts(T0))).toBe(false);
    expect(await store.acquireLease("a", "w2", opts(T0 + 1))).toMatchObject({
      owner: "w2",
      fence: 2,
    });
  });
}

/** S3: an append is refused unless it carries the lease's current fence. */
function fencingTests(h: Harness): void {
  it("refuses an append to an execution with no lease", async () => {
    const store = await h.open();
    for (const fence of [0, 1]) {
      expectRefused(await appendOne(store, batch(envelopes("a", 0, 1), fence)), "LOOM_FENCED");
    }
    expect(await visible(store, "a")).toEqual({ events: [], head: -1, summary: undefined });
    await acquire(store, "b");
    expectRefused(await appendOne(store, batch(envelopes("a", 0, 1), 1)), "LOOM_FENCED");
    expect(await store.head("a")).toBe(-1);
  });

  it("refuses a stale fence after a takeover by expiry, writing nothing", async () => {
    const store = await h.open();
    const stale = await start(store, "a", { count: 2 });
    const before = await visible(store, "a");
    const { fence } = await acquire(store, "a", "w2", T0 + TTL_MS);
    expect(fence).toBe(stale + 1);
    expectRefused(await appendOne(store, batch(envelopes("a", 2, 2), stale)), "LOOM_FENCED");
    expect(await visible(store, "a")).toEqual(before);
    expect((await appendOne(store, batch(envelopes("a", 2, 2), fence))).ok).toBe(true);
    expect(await store.head("a")).toBe(3);
  });

  it("refuses a stale or unknown fence after a takeover by fence", async () => {
    const store = await h.open();
    const stale = await start(store, "a", { count: 2 });
    const taken = await store.acquireLease("a", "w2", opts(T0, stale));
    expect(taken?.fence).toBe(stale + 1);
    const before = await visible(store, "a");
    for (const fence of [stale, stale + 2]) {
      expectRefused(await appendOne(store, batch(envelopes("a", 2, 1), fence)), "LOOM_FENCED");
    }
    // A stale writer learns it is fenced even when its sequence number is stale too.
    expectRefused(await appendOne(store, batch(envelopes("a", 1, 1), stale)), "LOOM_FENCED");
    expect(await visible(store, "a")).toEqual(before);
  });
}
