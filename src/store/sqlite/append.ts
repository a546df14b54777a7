/**
 * Appends on SQLite (S1..S4, S9, S15, S20): `appendMany` runs one `BEGIN IMMEDIATE` transaction
 * for the whole call, so writers are serialised by SQLite's lock and the fence and sequence checks
 * run inside the transaction that appends (S2, S3).
 *
 * A1. Checks first (append-check.ts checkBatch, the same as every store's), then writes: a refused
 *     batch has written nothing, so no savepoint is needed, and the others in the call stand (S4).
 * A2. What an append checks (head, status, fence) is cached for the executions this connection
 *     appended to since the last commit by any other connection (`PRAGMA data_version` tells): a
 *     group commit of many executions then runs no check query. The cache is cleared on a
 *     rollback and on anything another process committed; an id is dropped from it (`forget`) by
 *     this connection's own lease acquire and delete, which `data_version` does not see.
 * A3. A batch's lease claim and release, snapshot, notice, timer rows and fork row are written in its
 *     transaction, after its events (S9, S15). A first batch writes the executions row, which
 *     gives the execution its integer key (row-codec.ts C1), before its events.
 * A4. Integer keys are reserved KEY_BLOCK at a time (one `counters` update per block, not per
 *     start: a start then writes one page fewer). A block is this connection's once the
 *     transaction that reserved it commits, whoever commits after; when a transaction rolls back,
 *     what is left of the block is dropped, since its reservation may be what rolled back. Keys
 *     are unique, not dense: a dropped block, or one a closed store did not use up, is a gap.
 * A5. An execution's own timer rows are written by its own batches only (S7; others' batches
 *     write it wake rows, which its end never clears, S15). So while A2 caches an execution whose
 *     executions row this connection inserted, and none of its batches since set a timer row, it
 *     has none, and its terminal batch runs no delete of them. Whatever drops the cached entry
 *     (another connection's commit, a rollback, `forget`) drops that knowledge with it.
 */
import type Database from "better-sqlite3";
import type { Envelope, ExecutionStatus } from "../../kernel/events.ts";
import { LoomError, ensureError } from "../../kernel/errors.ts";
import { jsonText } from "../../kernel/json.ts";
import { checkBatch, effectiveFence } from "../append-check.ts";
import { duplicateError } from "../queue-admit.ts";
import type {
  AppendBatch,
  AppendOutcome,
  EventStore,
  QueueEntry,
  Spent,
  StoreHooks,
} from "../spi.ts";
import { hotEvents } from "./hot-events.ts";
import { kindCell, metaCell } from "./row-codec.ts";
import { snapshotCell } from "./snapshots.ts";
import type { Statements } from "./statements.ts";

const NOTICE_TTL_MS = 24 * 60 * 60 * 1000;
const KEY_BLOCK = 32;

/** A4: the keys this connection reserved and has not used yet, `next` up to `end` (excluded). */
interface KeyBlock {
  next: number;
  end: number;
}

/** What an append checks about an execution (A2). */
interface Checked {
  /** The execution's integer key (row-codec.ts C1), once its executions row exists. */
  x?: number;
  head: number;
  status?: ExecutionStatus;
  fence?: number;
  /** A5: known to have no timer rows of its own (never set while cached since its creation). */
  noTimers?: true;
}

/** The store's `appendMany`, and `forget(id)`, which drops what A2 caches about `id`. */
export function sqliteAppend(
  db: Database.Database,
  q: Statements,
  hooks: StoreHooks,
): Pick<EventStore, "appendMany"> & { forget: (id: string) => void } {
  const known = new Map<string, Checked>();
  const keys: KeyBlock = { next: 0, end: 0 };
  const dataVersion = db.prepare<[], number>("PRAGMA data_version").pluck();
  let seenVersion = -1;

  const appendTx = db.transaction((batches: readonly AppendBatch[]): AppendOutcome[] => {
    const version = dataVersion.get() ?? -1;
    if (version !== seenVersion) {
      known.clear();
      seenVersion = version;
    }
    const outcomes: AppendOutcome[] = batches.map((b) => {
      try {
        applyBatch(q, known, keys, b);
        return { ok: true };
      } catch (e) {
        if (!(e instanceof LoomError)) throw e;
        return { ok: false, error: e };
      }
    });
    hooks.beforeCommit?.(batches);
    return outcomes;
  });
  const hot = hotEvents(db, q);

  return {
    async appendMany(batches) {
      let outcomes: AppendOutcome[];
      // A4: inside another transaction (a savepoint), the reservation is not final here.
      const nested = db.inTransaction;
      try {
        outcomes = appendTx.immediate(batches);
        if (nested) keys.next = keys.end = 0;
      } catch (e) {
        known.clear();
        keys.next = keys.end = 0;
        throw ensureError(e);
      }
      hot(batches, outcomes);
      return outcomes;
    },
    forget: (id) => known.delete(id),
  };
}

/** A2: the cached check of `id`, or a fresh one from the database. */
function checked(q: Statements, known: Map<string, Checked>, id: string): Checked {
  const cached = known.get(id);
  if (cached) return cached;
  const row = q.check.get({ id });
  const fresh: Checked = { head: row?.head ?? -1 };
  if (row?.x !== null && row?.x !== undefined) fresh.x = row.x;
  if (row?.status) fresh.status = row.status;
  if (row?.fence !== null && row?.fence !== undefined) fresh.fence = row.fence;
  return fresh;
}

/** S24: the row's cells of what was spent (all null when the batch carries none). */
function spentCells(spent: Spent | undefined) {
  return {
    cost: spent?.costUsd ?? null,
    unknown: spent?.costUnknown ? 1 : null,
    tokens: spent?.tokens ?? null,
  };
}

/** S26..S28: the row's queue cells (all null for an execution of no queue). */
function queueCells(queue: QueueEntry | undefined) {
  return {
    queue: queue?.name ?? null,
    queueKey: queue?.key ?? null,
    priority: queue?.priority ?? null,
    dedupe: queue?.dedupe ?? null,
    notBefore: queue?.notBeforeMs ?? null,
  };
}

/** A4: a new integer key, from this connection's block (reserving the next one first if empty). */
function newKey(q: Statements, keys: KeyBlock): number {
  if (keys.next === keys.end) {
    keys.end = (q.reserveKeys.get(KEY_BLOCK) as number) + 1;
    keys.next = keys.end - KEY_BLOCK;
  }
  return keys.next++;
}

/** A1, A3: checks the batch, then writes it. */
function applyBatch(
  q: Statements,
  known: Map<string, Checked>,
  keys: KeyBlock,
  b: AppendBatch,
): void {
  const id = b.executionId;
  const row = checked(q, known, id);
  const leaseFence = row.fence;
  checkBatch(b, row.head, effectiveFence(b, leaseFence), row.status);
  const queue = b.queue;
  if (queue?.dedupe !== undefined && row.x === undefined) {
    // S27, before any write of the batch.
    const holder = q.queueHolder.get(queue.name, queue.dedupe);
    if (holder !== undefined) throw duplicateError(id, queue, holder);
  }
  if (leaseFence === undefined && b.claimLease) {
    q.claimLease.run(id, b.claimLease.owner, b.fence, b.claimLease.expiresAtMs);
  }
  const first = b.events[0] as Envelope;
  const last = b.events[b.events.length - 1] as Envelope;
  // An executions row and its key come together (migration 6 gave every older row one).
  const x = row.x ?? newKey(q, keys);
  if (row.x === undefined) {
    const principal = b.principal ?? null;
    q.insertExecution.run({
      id,
      flow: b.flow ?? "",
      status: b.status,
      at0: first.at,
      x,
      principal,
      ...spentCells(b.spent),
      ...queueCells(b.queue),
    });
  } else {
    if (row.status !== b.status) q.setStatus.run({ id, status: b.status });
    // S24: a batch that changed nothing spent writes nothing more.
    if (b.spent) q.setSpent.run({ id, ...spentCells(b.spent) });
    if (queue) q.setNotBefore.run(queue.notBeforeMs ?? null, id);
  }
  for (const e of b.events) {
    q.insertEvent.run(x, e.seq, kindCell(e.kind), e.at, jsonText(e.payload), metaCell(e.meta));
  }
  if (known.size > 10_000) known.clear();
  const ix = b.index;
  const noTimers = (row.x === undefined || row.noTimers) && !ix?.timersSet.length;
  const next: Checked = { x, head: last.seq, status: b.status, fence: b.fence };
  if (noTimers) next.noTimers = true;
  known.set(id, next);
  if (b.releaseLease !== undefined) q.releaseLease.run(id, b.releaseLease, b.fence);
  if (b.snapshot) q.saveSnapshot.run(id, b.snapshot.seq, snapshotCell(b.snapshot.stateJson));
  if (b.notice) {
    q.pruneNotices.run(last.at - NOTICE_TTL_MS);
    q.postNotice.run(b.notice.owner, id, b.notice.kind, last.at);
  }
  if (!ix) return;
  // S21: the fork's row under its origin.
  if (ix.forkedFrom) q.insertFork.run(ix.forkedFrom.executionId, id, ix.forkedFrom.seq);
  // S15: other executions' wake rows, in this batch's transaction.
  for (const w of ix.wakes ?? []) q.setTimer.run(w.executionId, w.timerId, w.wakeAtMs);
  if (ix.clearAllTimers) {
    if (!noTimers) q.clearTimers.run(id);
    return;
  }
  for (const t of ix.timersCleared) q.clearTimer.run(id, t);
  for (const t of ix.timersSet) q.setTimer.run(id, t.timerId, t.wakeAtMs);
}
