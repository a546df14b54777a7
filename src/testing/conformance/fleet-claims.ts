/**
 * S17 of the fleet conformance suite (fleet.ts): claims. Concurrent claimers get disjoint sets;
 * a claim takes only what no live lease holds, moving its fence (S3), and only runnable
 * executions of the named flows, at most `limit` of them.
 */
import { expect, it } from "./vitest.ts";
import { isLoomError } from "../../kernel/errors.ts";
import type { Lease } from "../../store/spi.ts";
import { appendOne, batch, envelopes, expectRefused, start, T0, TTL_MS } from "./helpers.ts";
import {
  claimOpts,
  ids,
  runnable,
  type FleetHarness,
  type FleetMemberStore,
} from "./fleet-helpers.ts";

/** S17: concurrent claimers share the runnable executions out; a live lease is not claimed. */
export function claimOwnershipTests(f: FleetHarness): void {
  it("two concurrent claimers on 50 runnable executions get disjoint sets covering all", async () => {
    const { store, peer } = await f.pair();
    const all = Array.from({ length: 50 }, (_, i) => `x-${String(i).padStart(2, "0")}`);
    for (const [i, id] of all.entries()) {
      await runnable(store, id, i % 2 ? "running" : "pending");
    }
    const drain = async (claimer: FleetMemberStore, owner: string) => {
      const got: Lease[] = [];
      for (;;) {
        const leases = await claimer.claimRunnable(owner, claimOpts(T0, 7));
        if (leases.length === 0) return got;
        got.push(...leases);
      }
    };
    const [first, second] = await Promise.all([drain(store, "c1"), drain(peer, "c2")]);
    const claimed = [...ids(first), ...ids(second)];
    expect(new Set(claimed).size).toBe(claimed.length);
    expect([...claimed].sort()).toEqual(all);
    for (const [owner, leases] of [
      ["c1", first],
      ["c2", second],
    ] as const) {
      for (const lease of leases) {
        expect(lease).toEqual({
          executionId: lease.executionId,
          owner,
          fence: 2,
          expiresAtMs: T0 + TTL_MS,
        });
        expect(await store.getLease(lease.executionId)).toEqual(lease);
      }
    }
    expect(await store.claimRunnable("c3", claimOpts())).toEqual([]);
  });

  it("a live lease is not claimed; an expired or released one is, and its fence moves", async () => {
    const store = await f.newStore();
    const live = await start(store, "live", { status: "running" });
    await runnable(store, "released", "pending");
    const later = T0 + TTL_MS - 1;
    expect(ids(await store.claimRunnable("c1", claimOpts(later)))).toEqual(["released"]);
    expect(await store.getLease("live")).toMatchObject({ owner: "w1", fence: live });
    const expired = T0 + TTL_MS;
    const [taken] = await store.claimRunnable("c2", claimOpts(expired));
    expect(taken).toEqual({
      executionId: "live",
      owner: "c2",
      fence: live + 1,
      expiresAtMs: expired + TTL_MS,
    });
    // The fence moved: what the old owner appends now is refused (S3).
    expectRefused(await appendOne(store, batch(envelopes("live", 1, 1), live)), "LOOM_FENCED");
    expect(await store.claimRunnable("c3", claimOpts(expired))).toEqual([]);
  });
}

/** S17: only runnable executions of the named flows, at most `limit`, with checked options. */
export function claimFilterTests(f: FleetHarness): void {
  it("claims only pending or running executions of the named flows, at most `limit`", async () => {
    const store = await f.newStore();
    for (const id of ["a-1", "a-2", "a-3"]) await runnable(store, id, "running", "alpha");
    for (const id of ["b-1", "b-2"]) await runnable(store, id, "pending", "beta");
    await runnable(store, "parked", "parked", "alpha");
    await runnable(store, "done", "completed", "alpha");
    expect(await store.claimRunnable("c", claimOpts(T0, 10, []))).toEqual([]);
    expect(await store.claimRunnable("c", claimOpts(T0, 0, ["alpha"]))).toEqual([]);
    expect(ids(await store.claimRunnable("c", claimOpts(T0, 10, ["beta", "gamma"])))).toEqual([
      "b-1",
      "b-2",
    ]);
    expect(await store.claimRunnable("c", claimOpts(T0, 2, ["alpha"]))).toHaveLength(2);
    expect(ids(await store.claimRunnable("c", claimOpts(T0, 2, ["alpha"])))).toHaveLength(1);
    expect(await store.claimRunnable("c", claimOpts(T0, 2, ["alpha"]))).toEqual([]);
    expect(await store.getLease("parked")).toMatchObject({ owner: undefined, fence: 1 });
    expect(await store.getLease("done")).toMatchObject({ owner: undefined, fence: 1 });
  });

  it("refuses a limit, ttl or time that is not a non-negative integer (LOOM_INVALID_INPUT)", async () => {
    const store = await f.newStore();
    for (const bad of [{ limit: -1 }, { limit: 1.5 }, { ttlMs: Number.NaN }, { nowMs: -5 }]) {
      const error: unknown = await store.claimRunnable("c", { ...claimOpts(), ...bad }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isLoomError(error, "LOOM_INVALID_INPUT"), JSON.stringify(bad)).toBe(true);
    }
  });
}
