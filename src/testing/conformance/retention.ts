/**
 * S13: an execution is deleted whole (events, snapshot, lease, timers) and nothing else is.
 * S14: compaction deletes the unkept events a snapshot covers, keeps the last one, and leaves
 * the sequence numbers, the head, the list and the next append as they were.
 */
import { describe, expect, it } from "./vitest.ts";
import { isLoomError } from "../../kernel/errors.ts";
import type { Envelope, EventKind } from "../../kernel/events.ts";
import { initialState } from "../../fold/state.ts";
import type { Store } from "../../store/spi.ts";
import {
  acquire,
  appendOne,
  batch,
  envelope,
  expectAllOk,
  expectRefused,
  start,
  T0,
  visible,
  type Harness,
} from "./helpers.ts";

const KINDS: EventKind[] = [
  "EXECUTION_STARTED",
  "STEP_STARTED",
  "STEP_COMPLETED",
  "QUOTA_EXCEEDED",
  "STEP_STARTED",
  "STEP_COMPLETED",
  "STEP_STARTED",
  "STEP_COMPLETED",
];

/** Execution `id` with the events of KINDS (0..7) and a snapshot at `snapshotSeq`. */
async function seeded(store: Store, id: string, snapshotSeq?: number): Promise<number> {
  const { fence } = await acquire(store, id);
  const events = KINDS.map((kind, seq) => envelope(id, seq, kind));
  expectAllOk(await store.appendMany([batch(events, fence)]));
  if (snapshotSeq !== undefined) await store.saveSnapshot(id, snapshotOf(id, snapshotSeq));
  return fence;
}

function snapshotOf(id: string, seq: number) {
  const state = initialState(id);
  state.seq = seq;
  state.status = "running";
  return { seq, state };
}

async function expectNoSnapshotError(call: Promise<number>): Promise<void> {
  const error: unknown = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isLoomError(error, "LOOM_COMPACTION_WITHOUT_SNAPSHOT")).toBe(true);
}

const seqs = (events: readonly Envelope[]) => events.map((e) => e.seq);

export function retentionSuite(h: Harness): void {
  describe("deleteExecution (S13)", () => {
    deleteTests(h);
  });

  describe("compact (S14)", () => {
    compactTests(h);
  });
}

/** S13: an execution is deleted whole, and nothing else is. */
function deleteTests(h: Harness): void {
  it("removes the events, snapshot, lease and timers of one execution, and nothing else", async () => {
    const store = await h.open();
    const fa = await start(store, "a", { count: 2 });
    const sleep = envelope("a", 2, "TIMER_SCHEDULED", {
      callId: "t1",
      scope: "",
      name: "sleep",
      wakeAtMs: T0 + 500,
    });
    const index = {
      timersSet: [{ timerId: "t1", wakeAtMs: T0 + 500 }],
      timersCleared: [],
      clearAllTimers: false,
    };
    expectAllOk(await store.appendMany([batch([sleep], fa, { status: "parked", index })]));
    await store.saveSnapshot("a", snapshotOf("a", 2));
    const fb = await start(store, "b", { count: 3 });
    const bTimer = {
      timersSet: [{ timerId: "tb", wakeAtMs: T0 + 900 }],
      timersCleared: [],
      clearAllTimers: false,
    };
    expectAllOk(
      await store.appendMany([batch([envelope("b", 3)], fb, { index: bTimer, status: "parked" })]),
    );
    await store.appendMessage("a", { topic: "main", key: "k", payload: 1, atMs: T0 });
    const b = await visible(store, "b");

    expect(await store.deleteExecution("a")).toBe(true);
    expect(await visible(store, "a")).toEqual({ events: [], head: -1, summary: undefined });
    expect(await store.loadSnapshot("a")).toBeUndefined();
    expect(await store.getLease("a")).toBeUndefined();
    const due = await store.dueTimers(Number.MAX_SAFE_INTEGER, 10);
    expect(due.map((t) => t.executionId)).toEqual(["b"]);
    expect(await store.nextWakeAt()).toBe(T0 + 900);
    // The chain's inbox is the chain's, and the other execution is untouched.
    expect(await store.readMessages("a", "main", -1, 10)).toHaveLength(1);
    expect(await visible(store, "b")).toEqual(b);
    expect(await store.deleteExecution("a")).toBe(false);
    expect(await store.deleteExecution("never")).toBe(false);
  });

  it("a deleted id can hold a new log from sequence 0", async () => {
    const store = await h.open();
    await start(store, "a", { count: 4, status: "completed" });
    await store.deleteExecution("a");
    const { fence } = await acquire(store, "a");
    expect(fence).toBe(1);
    expectAllOk(await store.appendMany([batch([envelope("a", 0)], fence)]));
    expect(seqs(await store.read("a"))).toEqual([0]);
    expect((await store.list()).map((x) => [x.executionId, x.head])).toEqual([["a", 0]]);
  });

  it("stays deleted after a restart (S5)", async () => {
    const reopen = h.reopen;
    if (!reopen) return;
    const store = await h.open();
    await start(store, "a", { count: 2 });
    await start(store, "b", { count: 2 });
    await store.deleteExecution("a");
    const after = await reopen(store);
    expect(await visible(after, "a")).toEqual({ events: [], head: -1, summary: undefined });
    expect(await after.head("b")).toBe(1);
  });
}

/** S14: compaction deletes what a snapshot covers, and the log reads on as before. */
function compactTests(h: Harness): void {
  it("without a snapshot at or past the sequence, refuses and deletes nothing", async () => {
    const store = await h.open();
    await seeded(store, "a");
    const before = await visible(store, "a");
    await expectNoSnapshotError(store.compact("a", 3, []));
    await store.saveSnapshot("a", snapshotOf("a", 2));
    await expectNoSnapshotError(store.compact("a", 3, []));
    expect(await visible(store, "a")).toEqual(before);
  });

  it("deletes the unkept events a snapshot covers; sequence numbers, head and list stay", async () => {
    const store = await h.open();
    const fence = await seeded(store, "a", 5);
    const before = await visible(store, "a");
    const kept: EventKind[] = ["EXECUTION_STARTED", "QUOTA_EXCEEDED"];
    expect(await store.compact("a", 5, kept)).toBe(4);
    const after = await visible(store, "a");
    expect(seqs(after.events)).toEqual([0, 3, 6, 7]);
    expect(after.events).toEqual(before.events.filter((e) => [0, 3, 6, 7].includes(e.seq)));
    expect(after.head).toBe(7);
    expect(after.summary).toEqual(before.summary);
    // Reads over the gap: from a sequence number, at most `limit` events.
    expect(seqs(await store.read("a", 1))).toEqual([3, 6, 7]);
    expect(seqs(await store.read("a", 1, 2))).toEqual([3, 6]);
    expect(seqs(await store.read("a", 4, 1))).toEqual([6]);
    expect(seqs(await store.read("a", 0, 1))).toEqual([0]);
    expect(await store.read("a", 8)).toEqual([]);
    // Appends go on at head + 1; a deleted sequence number is not free again.
    expectRefused(
      await appendOne(store, batch([envelope("a", 5)], fence)),
      "LOOM_SEQUENCE_CONFLICT",
    );
    expectAllOk(await store.appendMany([batch([envelope("a", 8)], fence)]));
    expect(seqs(await store.read("a"))).toEqual([0, 3, 6, 7, 8]);
    // A second compaction through the same point has nothing left to delete.
    expect(await store.compact("a", 5, kept)).toBe(0);
  });

  it("never deletes the last event, whatever its kind", async () => {
    const store = await h.open();
    await seeded(store, "a", 7);
    const before = await visible(store, "a");
    expect(await store.compact("a", 7, [])).toBe(7);
    const after = await visible(store, "a");
    expect(seqs(after.events)).toEqual([7]);
    expect(after.head).toBe(7);
    expect(after.summary).toEqual(before.summary);
  });

  it("compacts one execution only, and reads back the same after a restart (S5)", async () => {
    const store = await h.open();
    await seeded(store, "a", 5);
    await seeded(store, "b", 5);
    const b = await visible(store, "b");
    await store.compact("a", 5, ["EXECUTION_STARTED"]);
    expect(await visible(store, "b")).toEqual(b);
    const reopen = h.reopen;
    if (!reopen) return;
    const a = await visible(store, "a");
    const after = await reopen(store);
    expect(await visible(after, "a")).toEqual(a);
    expect(seqs(a.events)).toEqual([0, 6, 7]);
  });
}
