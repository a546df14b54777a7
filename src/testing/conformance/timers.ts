/**
 * S7: timer rows are written (and cleared) by the batch that carries their events, in its
 * transaction, and come due by wake time, earliest first.
 */
import { describe, expect, it } from "./vitest.ts";
import type { Envelope } from "../../kernel/events.ts";
import { indexChanges, type IndexChanges } from "../../fold/index-changes.ts";
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
  TTL_MS,
  type Harness,
} from "./helpers.ts";

const scheduled = (id: string, seq: number, timerId: string, wakeAtMs: number): Envelope =>
  envelope(id, seq, "TIMER_SCHEDULED", { callId: timerId, scope: "", name: "sleep", wakeAtMs });
const fired = (id: string, seq: number, timerId: string): Envelope =>
  envelope(id, seq, "TIMER_FIRED", { callId: timerId });
const ALL = Number.MAX_SAFE_INTEGER;

const summary = async (store: Store, nowMs = ALL, limit = 100) =>
  (await store.dueTimers(nowMs, limit)).map((t) => `${t.executionId}/${t.timerId}@${t.wakeAtMs}`);

/** a: t1@3000 (set with sequence 0), t2@1000; b: t3@2000, t4@9000. Returns the fences. */
async function seed(store: Store): Promise<{ fa: number; fb: number }> {
  const { fence: fa } = await acquire(store, "a");
  const a0 = [envelope("a", 0), scheduled("a", 1, "t1", 3000)];
  expectAllOk(await store.appendMany([batch(a0, fa)]));
  const fb = await start(store, "b");
  expectAllOk(
    await store.appendMany([
      batch([scheduled("a", 2, "t2", 1000)], fa, { status: "parked" }),
      batch([scheduled("b", 1, "t3", 2000), scheduled("b", 2, "t4", 9000)], fb),
    ]),
  );
  return { fa, fb };
}

export function timerSuite(h: Harness): void {
  describe("timers (S7)", () => {
    dueTests(h);
    batchIndexTests(h);
    rowTests(h);
  });
}

/** S7: timers come due by wake time, earliest first. */
function dueTests(h: Harness): void {
  it("an empty store has no timers", async () => {
    const store = await h.open();
    expect(await store.dueTimers(ALL, 10)).toEqual([]);
    expect(await store.nextWakeAt()).toBeUndefined();
  });

  it("returns only timers with wakeAtMs <= now, earliest first, up to the limit", async () => {
    const store = await h.open();
    await seed(store);
    expect(await store.dueTimers(2500, 10)).toEqual([
      { executionId: "a", timerId: "t2", wakeAtMs: 1000 },
      { executionId: "b", timerId: "t3", wakeAtMs: 2000 },
    ]);
    expect(await summary(store, 999)).toEqual([]);
    expect(await summary(store, 3000)).toEqual(["a/t2@1000", "b/t3@2000", "a/t1@3000"]);
    expect(await summary(store, 3000, 2)).toEqual(["a/t2@1000", "b/t3@2000"]);
    expect(await summary(store, ALL, 1)).toEqual(["a/t2@1000"]);
    expect(await summary(store)).toEqual(["a/t2@1000", "b/t3@2000", "a/t1@3000", "b/t4@9000"]);
    expect(await store.nextWakeAt()).toBe(1000);
  });
}

/** S7, S15: the rows a batch writes and clears, its own and other executions' (wake rows). */
function batchIndexTests(h: Harness): void {
  it("a TIMER_FIRED batch clears its timer, and setting an id again moves it", async () => {
    const store = await h.open();
    const { fa } = await seed(store);
    const events = [fired("a", 3, "t2"), scheduled("a", 4, "t1", 500)];
    expect(indexChanges(events)?.timersCleared).toEqual(["t2"]);
    expectAllOk(await store.appendMany([batch(events, fa)]));
    expect(await summary(store)).toEqual(["a/t1@500", "b/t3@2000", "b/t4@9000"]);
    expect(await store.nextWakeAt()).toBe(500);
  });

  it("clearAllTimers removes every timer of that execution only", async () => {
    const store = await h.open();
    const { fa } = await seed(store);
    const done = envelope("a", 3, "EXECUTION_COMPLETED", { output: 1 });
    done.meta = { kernel: true };
    const all: IndexChanges = { timersSet: [], timersCleared: [], clearAllTimers: true };
    expect(indexChanges([done])).toEqual(all);
    expectAllOk(await store.appendMany([batch([done], fa, { status: "completed", index: all })]));
    expect(await summary(store)).toEqual(["b/t3@2000", "b/t4@9000"]);
    expect(await store.nextWakeAt()).toBe(2000);
  });

  it("clearAllTimers wins over timers set in the same batch (a wait, then the end)", async () => {
    const store = await h.open();
    const { fb } = await seed(store);
    const done = envelope("b", 4, "EXECUTION_FAILED", { error: "x" });
    done.meta = { kernel: true };
    const events = [scheduled("b", 3, "t5", 1500), done];
    const index = indexChanges(events);
    expect(index).toMatchObject({ timersSet: [{ timerId: "t5" }], clearAllTimers: true });
    expectAllOk(await store.appendMany([batch(events, fb, { status: "failed", index })]));
    expect(await summary(store)).toEqual(["a/t2@1000", "a/t1@3000"]);
  });

  it("S15: a batch's wake rows are other executions' timer rows, written only if it is appended", async () => {
    const store = await h.open();
    const { fa, fb } = await seed(store);
    const done = envelope("b", 3, "EXECUTION_CANCELLED", { error: "x" });
    done.meta = { kernel: true };
    const wakes = [{ executionId: "c", timerId: "cascade:b", wakeAtMs: 1200 }];
    const index: IndexChanges = {
      timersSet: [],
      timersCleared: [],
      clearAllTimers: true,
      wakes,
    };
    // A batch refused (a stale fence) writes no wake row.
    const [refused] = await store.appendMany([
      batch([done], fa + fb + 100, { status: "cancelled", index }),
    ]);
    expectRefused(refused, "LOOM_FENCED");
    expect(await summary(store)).toEqual(["a/t2@1000", "b/t3@2000", "a/t1@3000", "b/t4@9000"]);
    expectAllOk(await store.appendMany([batch([done], fb, { status: "cancelled", index })]));
    // b's own rows went with its end; c's wake row came with it, and survives a reopen.
    expect(await summary(store)).toEqual(["a/t2@1000", "c/cascade:b@1200", "a/t1@3000"]);
    // c's own end clears c's own rows, never the wake row b wrote for it.
    const fc = await start(store, "c");
    const cEnd = envelope("c", 1, "EXECUTION_COMPLETED", {});
    cEnd.meta = { kernel: true };
    expectAllOk(await store.appendMany([batch([cEnd], fc, { status: "completed" })]));
    expect(await summary(store)).toEqual(["a/t2@1000", "c/cascade:b@1200", "a/t1@3000"]);
    if (!h.reopen) return;
    const again = await h.reopen(store);
    expect(await summary(again)).toEqual(["a/t2@1000", "c/cascade:b@1200", "a/t1@3000"]);
  });
}

/** S16: rows deleted and deferred one by one; S7: a refused batch writes none. */
function rowTests(h: Harness): void {
  it("deleteTimer removes one row; an unknown one is a no-op", async () => {
    const store = await h.open();
    await seed(store);
    await store.deleteTimer("a", "t2");
    await store.deleteTimer("a", "t3");
    await store.deleteTimer("zz", "t1");
    expect(await summary(store)).toEqual(["b/t3@2000", "a/t1@3000", "b/t4@9000"]);
    expect(await store.nextWakeAt()).toBe(2000);
    for (const [id, t] of [
      ["b", "t3"],
      ["a", "t1"],
      ["b", "t4"],
    ] as const) {
      await store.deleteTimer(id, t);
    }
    expect(await store.dueTimers(ALL, 10)).toEqual([]);
    expect(await store.nextWakeAt()).toBeUndefined();
  });

  it("S16: deferTimer moves one row's wake time, and never revives a deleted row", async () => {
    const store = await h.open();
    await seed(store);
    await store.deferTimer("a", "t2", 5000);
    expect(await summary(store)).toEqual(["b/t3@2000", "a/t1@3000", "a/t2@5000", "b/t4@9000"]);
    expect(await summary(store, 4000)).toEqual(["b/t3@2000", "a/t1@3000"]);
    await store.deferTimer("b", "t4", 100);
    expect(await store.nextWakeAt()).toBe(100);
    await store.deleteTimer("a", "t1");
    await store.deferTimer("a", "t1", 50);
    await store.deferTimer("zz", "t1", 50);
    expect(await summary(store)).toEqual(["b/t4@100", "b/t3@2000", "a/t2@5000"]);
    if (!h.reopen) return;
    const again = await h.reopen(store);
    expect(await summary(again)).toEqual(["b/t4@100", "b/t3@2000", "a/t2@5000"]);
  });

  it("a refused batch's timer changes are not written", async () => {
    const store = await h.open();
    const { fa, fb } = await seed(store);
    const before = await summary(store);
    await acquire(store, "b", "w2", T0 + TTL_MS);
    const setAndClear: IndexChanges = {
      timersSet: [{ timerId: "t9", wakeAtMs: 10 }],
      timersCleared: ["t3"],
      clearAllTimers: false,
    };
    const fenced = batch([scheduled("b", 3, "t9", 10), fired("b", 4, "t3")], fb, {
      index: setAndClear,
    });
    expectRefused(await appendOne(store, fenced), "LOOM_FENCED");
    const clearAll: IndexChanges = { timersSet: [], timersCleared: [], clearAllTimers: true };
    expectRefused(
      await appendOne(store, batch([envelope("b", 3)], fb, { index: clearAll })),
      "LOOM_FENCED",
    );
    const conflicted = batch([scheduled("a", 1, "t8", 5)], fa);
    expectRefused(await appendOne(store, conflicted), "LOOM_SEQUENCE_CONFLICT");
    expect(await summary(store)).toEqual(before);
    expect(await store.nextWakeAt()).toBe(1000);
  });
}
