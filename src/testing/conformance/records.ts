/**
 * S21: a fork's batch records it under its origin, in its transaction; `forksOf` lists an origin's
 * forks oldest first; a delete removes the rows of the execution deleted. S22: the fleet's member
 * rows and the leases each member holds.
 */
import { describe, expect, it } from "./vitest.ts";
import type { Envelope } from "../../kernel/events.ts";
import type { Member, Store } from "../../store/spi.ts";
import {
  acquire,
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

/** A fork's copy of `origin`'s prefix [0..at] as `id` (runtime/fork.ts V2: the fork point last). */
function forkEvents(origin: string, at: number, id: string): Envelope[] {
  return envelopes(id, 0, at + 1).map((e) => ({
    ...e,
    meta: { ...e.meta, fence: 1, forkedFrom: { executionId: origin, seq: at } },
  }));
}

/** The V1 batch of a fork: its copy, with its lease claimed. */
const forkBatch = (origin: string, at: number, id: string) =>
  batch(forkEvents(origin, at, id), 1, { claimLease: { owner: "w1", expiresAtMs: T0 + TTL_MS } });

async function fork(store: Store, origin: string, at: number, id: string): Promise<void> {
  expectAllOk(await store.appendMany([forkBatch(origin, at, id)]));
}

export function recordsSuite(h: Harness): void {
  describe("forks by origin (S21)", () => forkTests(h));
  describe("fleet members (S22)", () => memberTests(h));
}

function forkTests(h: Harness): void {
  it("records each fork under its origin with its fork point, oldest first, at most limit", async () => {
    const store = await h.open();
    await start(store, "o", { count: 4 });
    await fork(store, "o", 2, "o-f2");
    await fork(store, "o", 0, "o-f0");
    await fork(store, "o-f2", 1, "o-f2-f1");
    expect(await store.forksOf("o", 10)).toEqual([
      { executionId: "o-f2", seq: 2 },
      { executionId: "o-f0", seq: 0 },
    ]);
    expect(await store.forksOf("o", 1)).toEqual([{ executionId: "o-f2", seq: 2 }]);
    expect(await store.forksOf("o-f2", 10)).toEqual([{ executionId: "o-f2-f1", seq: 1 }]);
    expect(await store.forksOf("o-f0", 10)).toEqual([]);
    // A batch that is no fork point (a copied envelope before it) records nothing.
    expect(await store.forksOf("nobody", 10)).toEqual([]);
  });

  it("records a fork only if its batch is appended: a second fork to one id is refused and adds none", async () => {
    const store = await h.open();
    await start(store, "o", { count: 3 });
    await fork(store, "o", 1, "f");
    expectRefused(await appendOne(store, forkBatch("o", 2, "f")), "LOOM_FENCED");
    expect(await store.forksOf("o", 10)).toEqual([{ executionId: "f", seq: 1 }]);
  });

  it("records forks in a group commit beside other batches (S4), and none of a call that rolls back (S1)", async () => {
    let fail = false;
    const store = await h.open({
      beforeCommit: () => {
        if (fail) throw new Error("injected: before commit");
      },
    });
    const fence = await start(store, "o", { count: 2 });
    const step = batch(envelopes("o", 2, 1), fence);
    expectAllOk(await store.appendMany([forkBatch("o", 1, "f1"), step, forkBatch("o", 0, "f2")]));
    expect(await store.forksOf("o", 10)).toEqual([
      { executionId: "f1", seq: 1 },
      { executionId: "f2", seq: 0 },
    ]);
    fail = true;
    await expect(store.appendMany([forkBatch("o", 1, "f3")])).rejects.toThrow(/injected/);
    expect(await store.forksOf("o", 10)).toHaveLength(2);
    expect(await store.head("f3")).toBe(-1);
  });

  it("a delete (S13) removes the rows where the execution is the fork or the origin, no other", async () => {
    const store = await h.open();
    await start(store, "o", { count: 3 });
    await fork(store, "o", 1, "f");
    await fork(store, "o", 2, "g");
    await fork(store, "f", 0, "ff");
    expect(await store.deleteExecution("f")).toBe(true);
    expect(await store.forksOf("o", 10)).toEqual([{ executionId: "g", seq: 2 }]);
    expect(await store.forksOf("f", 10)).toEqual([]);
    // Its fork stays an execution of its own; only the link is gone.
    expect(await store.head("ff")).toBe(0);
    // A fork made again under a deleted fork's id is recorded anew.
    await fork(store, "o", 0, "f");
    expect(await store.forksOf("o", 10)).toEqual([
      { executionId: "g", seq: 2 },
      { executionId: "f", seq: 0 },
    ]);
  });

  const reopen = h.reopen;
  if (!reopen) return;
  it("survives a reopen (S5)", async () => {
    const store = await h.open();
    await start(store, "o", { count: 2 });
    await fork(store, "o", 1, "f");
    const again = await reopen(store);
    expect(await again.forksOf("o", 10)).toEqual([{ executionId: "f", seq: 1 }]);
  });
}

const member = (owner: string, lastHeartbeatMs: number, extra: Partial<Member> = {}): Member => ({
  owner,
  flows: ["flow-a", "flow-b"],
  startedAtMs: T0,
  lastHeartbeatMs,
  ...extra,
});

function memberTests(h: Harness): void {
  it("a heartbeat writes the member's row whole; members(since) answers the fresh ones by owner", async () => {
    const store = await h.open();
    expect(await store.members(0)).toEqual([]);
    await store.heartbeat(member("w2", T0, { host: "box", pid: 42 }));
    await store.heartbeat(member("w1", T0 + 10));
    await store.heartbeat(member("w2", T0 + 20, { flows: ["flow-c"] }));
    expect(await store.members(0)).toEqual([
      member("w1", T0 + 10),
      member("w2", T0 + 20, { flows: ["flow-c"] }),
    ]);
    expect((await store.members(T0 + 15)).map((m) => m.owner)).toEqual(["w2"]);
    await store.leaveFleet("w2");
    await store.leaveFleet("never-joined");
    expect((await store.members(0)).map((m) => m.owner)).toEqual(["w1"]);
  });

  it("a heartbeat drops the rows a day staler than it (a crashed member's), no fresher one", async () => {
    const store = await h.open();
    const day = 24 * 60 * 60 * 1000;
    await store.heartbeat(member("crashed", T0));
    await store.heartbeat(member("late", T0 + 1000));
    await store.heartbeat(member("w1", T0 + day + 500));
    expect((await store.members(0)).map((m) => m.owner)).toEqual(["late", "w1"]);
  });

  it("leasesOf answers the leases an owner holds unexpired, by execution id, at most limit", async () => {
    const store = await h.open();
    for (const id of ["c", "a", "b"]) await acquire(store, id, "w1");
    await acquire(store, "other", "w2");
    const released = await acquire(store, "d", "w1");
    await store.releaseLease("d", "w1", released.fence);
    await store.acquireLease("e", "w1", { ttlMs: 10, nowMs: T0 });
    const held = (id: string) => ({ executionId: id, fence: 1, expiresAtMs: T0 + TTL_MS });
    expect(await store.leasesOf("w1", T0 + 10, 10)).toEqual([held("a"), held("b"), held("c")]);
    expect(await store.leasesOf("w1", T0 + 5, 10)).toContainEqual({
      executionId: "e",
      fence: 1,
      expiresAtMs: T0 + 10,
    });
    expect(await store.leasesOf("w1", T0 + 10, 2)).toEqual([held("a"), held("b")]);
    expect(await store.leasesOf("nobody", T0, 10)).toEqual([]);
  });

  const reopen = h.reopen;
  if (!reopen) return;
  it("survives a reopen (S5)", async () => {
    const store = await h.open();
    await store.heartbeat(member("w1", T0, { host: "h", pid: 7 }));
    const again = await reopen(store);
    expect(await again.members(T0)).toEqual([member("w1", T0, { host: "h", pid: 7 })]);
  });
}
