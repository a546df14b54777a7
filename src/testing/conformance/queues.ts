/**
 * Queues (spi-queues.ts S26..S29): admission in order under a queue's limits, a queued
 * execution's dedupe key, its notBeforeMs and its move, the queue's view, and the status `queued`
 * in the list. A queued execution is recorded as the runtime records one: its sequence 0 claims
 * the lease and lets it go in the same batch, so it waits with a free lease.
 */
import { describe, expect, it } from "./vitest.ts";
import type { EventKind, ExecutionStatus } from "../../kernel/events.ts";
import { isFleetStore, type AppendBatch, type QueueEntry, type Store } from "../../store/spi.ts";
import {
  appendOne,
  batch,
  envelope,
  expectAllOk,
  expectRefused,
  FLOW,
  T0,
  TTL_MS,
  type Harness,
} from "./helpers.ts";

const Q = "q1";
const ADMIT = { queue: Q, limits: {}, flows: [FLOW], limit: 10, ttlMs: TTL_MS, nowMs: T0 };

/** Sequence 0 of `id`, queued in `queue`, recorded at T0 + `age` (so admission order is chosen). */
function recordBatch(id: string, queue: Partial<QueueEntry>, age = 0, flow = FLOW): AppendBatch {
  const e = { ...envelope(id, 0), at: T0 + age };
  return batch([e], 1, {
    flow,
    status: "queued",
    queue: { name: Q, priority: 0, ...queue },
    claimLease: { owner: "recorder", expiresAtMs: T0 + TTL_MS },
    releaseLease: "recorder",
  });
}

async function record(store: Store, id: string, queue: Partial<QueueEntry> = {}, age = 0) {
  expectAllOk(await store.appendMany([recordBatch(id, queue, age)]));
}

/** Appends the next event of `id` under `fence` with `status` (an admission's, a step's, an end's). */
async function advance(
  store: Store,
  id: string,
  fence: number,
  status: ExecutionStatus,
  extra: Partial<AppendBatch> = {},
) {
  const seq = (await store.head(id)) + 1;
  const kinds: Partial<Record<ExecutionStatus, EventKind>> = {
    running: "EXECUTION_ADMITTED",
    queued: "START_DEBOUNCED",
    completed: "EXECUTION_COMPLETED",
  };
  const e = envelope(id, seq, kinds[status] ?? "STEP_STARTED");
  expectAllOk(await store.appendMany([batch([e], fence, { status, ...extra })]));
}

const ids = (admitted: { executionId: string }[]) => admitted.map((a) => a.executionId).sort();

export function queueSuite(h: Harness): void {
  describe("queues: admission (S26)", () => admissionTests(h));
  describe("queues: limits (S26)", () => limitTests(h));
  describe("queues: dedupe and notBefore (S27, S28)", () => dedupeTests(h));
  describe("queues: view and list (S29)", () => viewTests(h));
}

function admissionTests(h: Harness): void {
  it("S26: admits in admission order (priority, then age, then id) and takes the leases", async () => {
    const store = await h.open();
    await record(store, "x-old", {}, 0);
    await record(store, "x-new", {}, 50);
    await record(store, "x-urgent", { priority: -1 }, 90);
    await record(store, "x-tie", {}, 50);
    const admitted = await store.admitQueued("w1", { ...ADMIT, limit: 3 });
    expect(ids(admitted)).toEqual(["x-new", "x-old", "x-urgent"]);
    for (const a of admitted) {
      expect(a).toMatchObject({ fence: 2, expiresAtMs: T0 + TTL_MS });
      expect(await store.getLease(a.executionId)).toEqual({ ...a, owner: "w1" });
    }
    // Admitted but not appended yet: still queued, holding a live lease, so not admitted again.
    expect(ids(await store.admitQueued("w2", ADMIT))).toEqual(["x-tie"]);
    expect(await store.admitQueued("w2", ADMIT)).toEqual([]);
  });

  it("S26: only executions of the named flows, and none past the asked limit", async () => {
    const store = await h.open();
    expectAllOk(await store.appendMany([recordBatch("b1", {}, 0, "flow-b")]));
    await record(store, "a1", {}, 10);
    await record(store, "a2", {}, 20);
    expect(await store.admitQueued("w1", { ...ADMIT, flows: [] })).toEqual([]);
    expect(ids(await store.admitQueued("w1", { ...ADMIT, limit: 1 }))).toEqual(["a1"]);
    expect(ids(await store.admitQueued("w1", ADMIT))).toEqual(["a2"]);
    expect(ids(await store.admitQueued("w1", { ...ADMIT, flows: ["flow-b"] }))).toEqual(["b1"]);
  });

  it("S26: a lease that expired gives the slot back; the execution is admissible again", async () => {
    const store = await h.open();
    await record(store, "x1");
    const limits = { concurrency: 1 };
    const [first] = await store.admitQueued("w1", { ...ADMIT, limits });
    expect(first?.fence).toBe(2);
    // Live at T0 + TTL_MS - 1: active, so the queue is full.
    expect(await store.admitQueued("w2", { ...ADMIT, limits, nowMs: T0 + TTL_MS - 1 })).toEqual([]);
    const again = await store.admitQueued("w2", { ...ADMIT, limits, nowMs: T0 + TTL_MS });
    expect(again).toEqual([{ executionId: "x1", fence: 3, expiresAtMs: T0 + 2 * TTL_MS }]);
    // The first admitter's fence is stale: its append is refused.
    const e = envelope("x1", 1, "EXECUTION_ADMITTED");
    expectRefused(await appendOne(store, batch([e], 2)), "LOOM_FENCED");
  });

  it("S26: a queued execution is never claimed as runnable (S17), admitted or not", async () => {
    const store = await h.open();
    if (!isFleetStore(store)) return;
    await record(store, "x1");
    await record(store, "x2");
    await store.admitQueued("w1", { ...ADMIT, limit: 1 });
    const claim = { flows: [FLOW], limit: 10, ttlMs: TTL_MS, nowMs: T0 + 2 * TTL_MS };
    expect(await store.claimRunnable("w2", claim)).toEqual([]);
  });

  it("S26: bad options are refused with InvalidInputError before anything is taken", async () => {
    const store = await h.open();
    await record(store, "x1");
    const bad = [
      { ...ADMIT, queue: "" },
      { ...ADMIT, limit: -1 },
      { ...ADMIT, ttlMs: 1.5 },
      { ...ADMIT, limits: { concurrency: -1 } },
      { ...ADMIT, flows: "flow-a" as unknown as string[] },
    ];
    for (const opts of bad) {
      await expect(store.admitQueued("w1", opts)).rejects.toMatchObject({
        code: "LOOM_INVALID_INPUT",
      });
    }
    expect((await store.getLease("x1"))?.owner).toBeUndefined();
  });
}

function limitTests(h: Harness): void {
  it("S26: the queue's concurrency counts admitted and running executions; an end frees a slot", async () => {
    const store = await h.open();
    for (let i = 0; i < 4; i++) await record(store, `x${i}`, {}, i);
    const limits = { concurrency: 2 };
    const admitted = await store.admitQueued("w1", { ...ADMIT, limits });
    expect(ids(admitted)).toEqual(["x0", "x1"]);
    expect(await store.admitQueued("w1", { ...ADMIT, limits })).toEqual([]);
    // Admitted and appended: running, still active.
    await advance(store, "x0", 2, "running");
    expect(await store.admitQueued("w1", { ...ADMIT, limits })).toEqual([]);
    await advance(store, "x0", 2, "completed", { releaseLease: "w1" });
    expect(ids(await store.admitQueued("w1", { ...ADMIT, limits }))).toEqual(["x2"]);
    expect(await store.admitQueued("w1", { ...ADMIT, limits })).toEqual([]);
  });

  it("S26: a full key is passed over, not waited on; keyless executions count toward the queue only", async () => {
    const store = await h.open();
    await record(store, "a1", { key: "A" }, 0);
    await record(store, "a2", { key: "A" }, 10);
    await record(store, "b1", { key: "B" }, 20);
    await record(store, "n1", {}, 30);
    await record(store, "a3", { key: "A" }, 40);
    const limits = { keyConcurrency: 1 };
    expect(ids(await store.admitQueued("w1", { ...ADMIT, limits }))).toEqual(["a1", "b1", "n1"]);
    expect(await store.admitQueued("w1", { ...ADMIT, limits })).toEqual([]);
    await advance(store, "a1", 2, "running");
    await advance(store, "a1", 2, "completed", { releaseLease: "w1" });
    expect(ids(await store.admitQueued("w1", { ...ADMIT, limits }))).toEqual(["a2"]);
    // Both limits at once: the queue's is reached before key A's next.
    await record(store, "c1", { key: "C" }, 50);
    const both = { keyConcurrency: 2, concurrency: 5 };
    expect(ids(await store.admitQueued("w1", { ...ADMIT, limits: both }))).toEqual(["a3", "c1"]);
  });

  it("S26: a parked execution of the queue is active; a cancelled one is not", async () => {
    const store = await h.open();
    await record(store, "x1", {}, 0);
    await record(store, "x2", {}, 10);
    await record(store, "x3", {}, 20);
    const limits = { concurrency: 1 };
    await store.admitQueued("w1", { ...ADMIT, limits });
    await advance(store, "x1", 2, "parked", { releaseLease: "w1" });
    expect(await store.admitQueued("w1", { ...ADMIT, limits })).toEqual([]);
    await advance(store, "x1", 2, "cancelled");
    expect(ids(await store.admitQueued("w1", { ...ADMIT, limits }))).toEqual(["x2"]);
  });
}

function dedupeTests(h: Harness): void {
  it("S27: a second execution with a queued one's dedupe key is refused and writes nothing", async () => {
    const store = await h.open();
    await record(store, "x1", { dedupe: "d" });
    const [dup, other, elsewhere] = await store.appendMany([
      recordBatch("x2", { dedupe: "d" }),
      recordBatch("x3", { dedupe: "e" }),
      recordBatch("x4", { dedupe: "d", name: "q2" }),
    ]);
    const error = expectRefused(dup, "LOOM_QUEUE_DUPLICATE");
    expect(error.details).toEqual({ existingId: "x1" });
    expect([other?.ok, elsewhere?.ok]).toEqual([true, true]);
    expect(await store.head("x2")).toBe(-1);
    expect(await store.getLease("x2")).toBeUndefined();
    expect((await store.list()).map((x) => x.executionId)).toEqual(["x1", "x3", "x4"]);
  });

  it("S27: two batches of one call with one dedupe key: the first wins", async () => {
    const store = await h.open();
    const outcomes = await store.appendMany([
      recordBatch("x1", { dedupe: "d" }),
      recordBatch("x2", { dedupe: "d" }),
    ]);
    expect(outcomes[0]?.ok).toBe(true);
    expect(expectRefused(outcomes[1], "LOOM_QUEUE_DUPLICATE").details).toEqual({
      existingId: "x1",
    });
    expect(await store.head("x2")).toBe(-1);
  });

  it("S27: the key is free again once the holder is admitted (appended) or ended", async () => {
    const store = await h.open();
    await record(store, "x1", { dedupe: "d" });
    await store.admitQueued("w1", ADMIT);
    // Admitted, not appended: still queued, still holding the key.
    expectRefused(
      await appendOne(store, recordBatch("x2", { dedupe: "d" })),
      "LOOM_QUEUE_DUPLICATE",
    );
    await advance(store, "x1", 2, "running");
    await record(store, "x2", { dedupe: "d" });
    await advance(store, "x2", 1, "cancelled");
    await record(store, "x3", { dedupe: "d" });
  });

  it("S28: notBeforeMs holds admission back, and a later batch's queue moves it", async () => {
    const store = await h.open();
    await record(store, "x1", { notBeforeMs: T0 + 1000 });
    expect(await store.admitQueued("w1", { ...ADMIT, nowMs: T0 + 999 })).toEqual([]);
    // A debounce moves it later, in the batch's transaction.
    await advance(store, "x1", 1, "queued", {
      queue: { name: Q, priority: 0, notBeforeMs: T0 + 5000 },
    });
    expect(await store.admitQueued("w1", { ...ADMIT, nowMs: T0 + 4999 })).toEqual([]);
    const view = await store.queueView(Q, { nowMs: T0, limit: 10 });
    expect(view.waiting[0]?.notBeforeMs).toBe(T0 + 5000);
    // A refused batch moves nothing.
    const stale = batch([envelope("x1", 1, "START_DEBOUNCED")], 1, {
      status: "queued",
      queue: { name: Q, priority: 0, notBeforeMs: T0 + 9000 },
    });
    expectRefused(await appendOne(store, stale), "LOOM_SEQUENCE_CONFLICT");
    expect(ids(await store.admitQueued("w1", { ...ADMIT, nowMs: T0 + 5000 }))).toEqual(["x1"]);
  });

  it("QA1: a malformed queue entry refuses its batch with InvalidInputError", async () => {
    const store = await h.open();
    const bad = recordBatch("x1", { name: "" });
    expectRefused(await appendOne(store, bad), "LOOM_INVALID_INPUT");
    const nan = recordBatch("x2", { priority: Number.NaN });
    expectRefused(await appendOne(store, nan), "LOOM_INVALID_INPUT");
    expect(await store.head("x1")).toBe(-1);
  });
}

function viewTests(h: Harness): void {
  it("S29: the view counts active executions (in all, by key) and lists the waiting in order", async () => {
    const store = await h.open();
    await record(store, "a1", { key: "A" }, 0);
    await record(store, "a2", { key: "A" }, 10);
    await record(store, "b1", { key: "B", priority: 5 }, 5);
    await record(store, "n1", { notBeforeMs: T0 + 99 }, 20);
    await record(store, "n2", {}, 30);
    await store.admitQueued("w1", { ...ADMIT, limit: 1 });
    const view = await store.queueView(Q, { nowMs: T0, limit: 2 });
    expect(view).toEqual({
      queue: Q,
      active: 1,
      activeByKey: { A: 1 },
      waiting: [
        { executionId: "a2", flow: FLOW, key: "A", priority: 0, createdAtMs: T0 + 10 },
        { executionId: "n1", flow: FLOW, priority: 0, createdAtMs: T0 + 20, notBeforeMs: T0 + 99 },
      ],
      waitingCount: 4,
    });
    const all = await store.queueView(Q, { nowMs: T0, limit: 10 });
    expect(all.waiting.map((w) => w.executionId)).toEqual(["a2", "n1", "n2", "b1"]);
    // Once a1's lease expires it waits again, first in line.
    const later = await store.queueView(Q, { nowMs: T0 + TTL_MS, limit: 1 });
    expect([later.active, later.waiting[0]?.executionId, later.waitingCount]).toEqual([0, "a1", 5]);
    expect(await store.queueView("none", { nowMs: T0, limit: 5 })).toEqual({
      queue: "none",
      active: 0,
      activeByKey: {},
      waiting: [],
      waitingCount: 0,
    });
  });

  it("S29: queueNames lists the queues that hold queued executions", async () => {
    const store = await h.open();
    expect(await store.queueNames()).toEqual([]);
    await record(store, "x1", { name: "zq" });
    await record(store, "x2", { name: "aq" });
    await record(store, "x3", { name: "aq" });
    expect(await store.queueNames()).toEqual(["aq", "zq"]);
    await advance(store, "x1", 1, "cancelled");
    expect(await store.queueNames()).toEqual(["aq"]);
  });

  it("S29: list shows each execution's queue, and filters on the status queued", async () => {
    const store = await h.open();
    await record(store, "x1");
    await record(store, "x2");
    await store.admitQueued("w1", { ...ADMIT, limit: 1 });
    await advance(store, "x1", 2, "running");
    expectAllOk(
      await store.appendMany([
        batch([envelope("plain", 0)], 1, { claimLease: { owner: "w1", expiresAtMs: T0 + TTL_MS } }),
      ]),
    );
    const queued = await store.list({ status: ["queued"] });
    expect(queued.map((x) => [x.executionId, x.status, x.queue])).toEqual([["x2", "queued", Q]]);
    const all = await store.list();
    expect(all.map((x) => [x.executionId, x.queue])).toEqual([
      ["plain", undefined],
      ["x1", Q],
      ["x2", Q],
    ]);
    expect(all.find((x) => x.executionId === "plain")).not.toHaveProperty("queue");
  });
}
