/**
 * Appends to the memory store (S1..S4, S9, S15, S20): `appendMany` applies each batch to the
 * data, recording how to undo each change.
 *
 * A1. Checks first (append-check.ts checkBatch, the same as every store's), then writes: a refused
 *     batch is undone from its mark, so it writes nothing, and the others in the call stand (S4).
 * A2. Anything else thrown (an invariant violation, a failing test hook) undoes the whole call, in
 *     reverse order of the changes: the call is one transaction, committed or not at all (S1).
 * A3. A batch's lease claim and release, snapshot, notice, timer rows and fork row apply with it and are
 *     undone with it (S9); its wakes are collected as it applies and sent only once the call
 *     committed (fleet.ts F2).
 */
import { isWakeId } from "../../fold/index-changes.ts";
import type { Envelope } from "../../kernel/events.ts";
import { ensureError, LoomError } from "../../kernel/errors.ts";
import { checkBatch, effectiveFence } from "../append-check.ts";
import { duplicateError } from "../queue-admit.ts";
import type {
  AppendBatch,
  AppendOutcome,
  DueTimer,
  EventStore,
  ExecutionSummary,
  FleetWake,
  Lease,
  Spent,
} from "../spi.ts";
import { timerKey, live, wake, type Data, type Handle } from "./data.ts";
import { batchWakes } from "./fleet.ts";
import { lastSeq, StoredEvent } from "./stored-event.ts";

const NOTICE_TTL_MS = 24 * 60 * 60 * 1000;

type Undo = (() => void)[];

export function memoryAppend(h: Handle): EventStore["appendMany"] {
  const { data, hooks } = h;
  return async (batches) => {
    live(h);
    const outcomes: AppendOutcome[] = [];
    const undo: Undo = [];
    /** What the appended batches wake (S18), each judged right after it applied. */
    const wakes: FleetWake[] = [];
    try {
      for (const b of batches) {
        const mark = undo.length;
        try {
          applyBatch(data, b, undo);
          outcomes.push({ ok: true });
          if (h.own) {
            const id = b.executionId;
            wakes.push(...batchWakes(b, data.leases.get(id)?.owner, data.queues.get(id)?.name));
          }
        } catch (e) {
          if (!(e instanceof LoomError)) throw e;
          for (const u of undo.splice(mark).reverse()) u();
          outcomes.push({ ok: false, error: e });
        }
      }
      hooks.beforeCommit?.(batches);
    } catch (e) {
      for (const u of undo.reverse()) u();
      throw ensureError(e);
    }
    wake(h, () => wakes);
    return outcomes;
  };
}

function applyBatch(data: Data, b: AppendBatch, undo: Undo): void {
  const log = data.events.get(b.executionId);
  const lease = data.leases.get(b.executionId);
  checkBatch(
    b,
    lastSeq(log),
    effectiveFence(b, lease?.fence),
    data.executions.get(b.executionId)?.status,
  );
  applyQueue(data, b, log === undefined, undo);
  applyLease(data, b, lease, undo);
  applySnapshot(data, b, undo);
  applyNotice(data, b, undo);
  applyEvents(data, b, log, undo);
  applyTimers(data, b, undo);
  applyFork(data, b, undo);
}

/**
 * S27, S28: a first batch's queue entry, refused (before any write) when a queued execution of
 * its queue holds its dedupe key; a later batch's moves the entry's notBeforeMs.
 */
function applyQueue(data: Data, b: AppendBatch, first: boolean, undo: Undo): void {
  const q = b.queue;
  const id = b.executionId;
  if (!q) return;
  const prev = data.queues.get(id);
  if (!first) {
    if (!prev) return;
    const moved = { ...prev };
    if (q.notBeforeMs === undefined) delete moved.notBeforeMs;
    else moved.notBeforeMs = q.notBeforeMs;
    data.queues.set(id, moved);
    undo.push(() => data.queues.set(id, prev));
    return;
  }
  if (q.dedupe !== undefined) {
    for (const [other, entry] of data.queues) {
      const queued = data.executions.get(other)?.status === "queued";
      if (queued && entry.name === q.name && entry.dedupe === q.dedupe) {
        throw duplicateError(id, q, other);
      }
    }
  }
  data.queues.set(id, { ...q });
  undo.push(() => data.queues.delete(id));
}

/** S21: the fork's row under its origin. */
function applyFork(data: Data, b: AppendBatch, undo: Undo): void {
  const from = b.index?.forkedFrom;
  if (!from) return;
  const forks = data.forks.get(from.executionId) ?? [];
  if (forks.length === 0) data.forks.set(from.executionId, forks);
  forks.push({ executionId: b.executionId, seq: from.seq });
  undo.push(() => {
    forks.pop();
    if (forks.length === 0) data.forks.delete(from.executionId);
  });
}

/** The batch's events, and its execution's summary. */
function applyEvents(data: Data, b: AppendBatch, log: StoredEvent[] | undefined, undo: Undo): void {
  const events = log ?? [];
  if (!log) {
    data.events.set(b.executionId, events);
    undo.push(() => data.events.delete(b.executionId));
  }
  const before = events.length;
  undo.push(() => (events.length = before));
  for (const e of b.events) events.push(new StoredEvent(e));
  const prev = data.executions.get(b.executionId);
  const last = b.events[b.events.length - 1] as Envelope;
  const row: ExecutionSummary = {
    executionId: b.executionId,
    flow: prev?.flow ?? b.flow ?? "",
    status: b.status,
    head: last.seq,
    createdAtMs: prev?.createdAtMs ?? (b.events[0] as Envelope).at,
    updatedAtMs: last.at,
  };
  // S24: the principal of sequence 0, and the latest spent a batch carried.
  const principal = prev ? prev.principal : b.principal;
  if (principal !== undefined) row.principal = principal;
  const queue = data.queues.get(b.executionId)?.name;
  if (queue !== undefined) row.queue = queue;
  const spent = b.spent ?? (prev && spentOfRow(prev));
  if (spent?.costUsd !== undefined) row.costUsd = spent.costUsd;
  if (spent?.costUnknown) row.costUnknown = true;
  if (spent?.tokens !== undefined) row.tokens = spent.tokens;
  data.executions.set(b.executionId, row);
  undo.push(() =>
    prev ? data.executions.set(b.executionId, prev) : data.executions.delete(b.executionId),
  );
}

const spentOfRow = (x: ExecutionSummary): Spent => ({
  ...(x.costUsd === undefined ? {} : { costUsd: x.costUsd }),
  ...(x.costUnknown ? { costUnknown: true } : {}),
  ...(x.tokens === undefined ? {} : { tokens: x.tokens }),
});

/** Keeps a timer row's value from before the batch (once), for the batch's undo. */
function remember(
  saved: Map<string, DueTimer | undefined>,
  timers: Map<string, DueTimer>,
  key: string,
): void {
  if (!saved.has(key)) saved.set(key, timers.get(key));
}

/** The batch's timer rows (S7) and other executions' wake rows (S15). */
function applyTimers(data: Data, b: AppendBatch, undo: Undo): void {
  const ix = b.index;
  // A wait with no wake time (a plain suspend) touches no timer row: nothing to save or undo.
  const none =
    !ix ||
    (!ix.clearAllTimers &&
      ix.timersCleared.length + ix.timersSet.length + (ix.wakes?.length ?? 0) === 0);
  if (none) return;
  const saved = new Map<string, DueTimer | undefined>();
  if (ix.clearAllTimers) {
    for (const [key, t] of data.timers) {
      // Never the wake rows others wrote for it (S15).
      if (t.executionId === b.executionId && !isWakeId(t.timerId)) {
        remember(saved, data.timers, key);
        data.timers.delete(key);
      }
    }
  }
  for (const id of ix.timersCleared) {
    remember(saved, data.timers, timerKey(b.executionId, id));
    data.timers.delete(timerKey(b.executionId, id));
  }
  if (!ix.clearAllTimers) {
    for (const t of ix.timersSet) {
      const key = timerKey(b.executionId, t.timerId);
      remember(saved, data.timers, key);
      data.timers.set(key, { executionId: b.executionId, ...t });
    }
  }
  // S15: other executions' wake rows, in this batch's transaction.
  for (const w of ix.wakes ?? []) {
    const key = timerKey(w.executionId, w.timerId);
    remember(saved, data.timers, key);
    data.timers.set(key, {
      executionId: w.executionId,
      timerId: w.timerId,
      wakeAtMs: w.wakeAtMs,
    });
  }
  undo.push(() => {
    for (const [key, t] of saved) {
      if (t) data.timers.set(key, t);
      else data.timers.delete(key);
    }
  });
}

function applyLease(data: Data, b: AppendBatch, lease: Lease | undefined, undo: Undo): void {
  const id = b.executionId;
  if (!lease && b.claimLease) {
    const { owner, expiresAtMs } = b.claimLease;
    data.leases.set(id, { executionId: id, owner, fence: b.fence, expiresAtMs });
    undo.push(() => data.leases.delete(id));
  }
  const held = data.leases.get(id);
  if (
    held &&
    b.releaseLease !== undefined &&
    held.owner === b.releaseLease &&
    held.fence === b.fence
  ) {
    const owner = held.owner;
    held.owner = undefined;
    undo.push(() => (held.owner = owner));
  }
}

function applyNotice(data: Data, b: AppendBatch, undo: Undo): void {
  if (!b.notice) return;
  const atMs = b.events[b.events.length - 1]?.at ?? 0;
  const before = data.notices;
  // A notice to an owner that never takes it (it died) is dropped after a day, as in SQLite.
  data.notices = [
    ...before.filter((n) => n.atMs >= atMs - NOTICE_TTL_MS),
    { ...b.notice, executionId: b.executionId, atMs },
  ];
  undo.push(() => (data.notices = before));
}

function applySnapshot(data: Data, b: AppendBatch, undo: Undo): void {
  const snap = b.snapshot;
  const prev = data.snapshots.get(b.executionId);
  if (!snap || (prev && prev.seq > snap.seq)) return;
  data.snapshots.set(b.executionId, { seq: snap.seq, stateJson: snap.stateJson });
  undo.push(() =>
    prev ? data.snapshots.set(b.executionId, prev) : data.snapshots.delete(b.executionId),
  );
}
