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
 * A3. A batch's lease claim and release, snapshot, notice and timer rows are written in its
 *     transaction, after its events (S9, S15).
 */
import type Database from "better-sqlite3";
import type { Envelope, EnvelopeMeta, ExecutionStatus } from "../../kernel/events.ts";
import { LoomError, ensureError } from "../../kernel/errors.ts";
import { jsonText } from "../../kernel/json.ts";
import { checkBatch, effectiveFence } from "../append-check.ts";
import type { AppendBatch, AppendOutcome, EventStore, StoreHooks } from "../spi.ts";
import { hotEvents } from "./hot-events.ts";
import type { Statements } from "./statements.ts";

const NOTICE_TTL_MS = 24 * 60 * 60 * 1000;

/** What an append checks about an execution (A2). */
interface Checked {
  head: number;
  status?: ExecutionStatus;
  fence?: number;
}

/** The meta of nearly every envelope is `{ fence }` or `{ kernel, fence }`: no serialiser needed. */
function metaText(meta: EnvelopeMeta): string {
  const keys = Object.keys(meta);
  if (keys.length === 1 && keys[0] === "fence" && Number.isSafeInteger(meta.fence)) {
    return `{"fence":${meta.fence}}`;
  }
  return JSON.stringify(meta);
}

/** The store's `appendMany`, and `forget(id)`, which drops what A2 caches about `id`. */
export function sqliteAppend(
  db: Database.Database,
  q: Statements,
  hooks: StoreHooks,
): Pick<EventStore, "appendMany"> & { forget: (id: string) => void } {
  const known = new Map<string, Checked>();
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
        applyBatch(q, known, b);
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
      try {
        outcomes = appendTx.immediate(batches);
      } catch (e) {
        known.clear();
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
  if (row?.status) fresh.status = row.status;
  if (row?.fence !== null && row?.fence !== undefined) fresh.fence = row.fence;
  return fresh;
}

/** A1, A3: checks the batch, then writes it. */
function applyBatch(q: Statements, known: Map<string, Checked>, b: AppendBatch): void {
  const id = b.executionId;
  const row = checked(q, known, id);
  const leaseFence = row.fence;
  checkBatch(b, row.head, effectiveFence(b, leaseFence), row.status);
  if (leaseFence === undefined && b.claimLease) {
    q.claimLease.run(id, b.claimLease.owner, b.fence, b.claimLease.expiresAtMs);
  }
  for (const e of b.events) {
    q.insertEvent.run(
      id,
      e.seq,
      e.kind,
      e.at,
      jsonText(e.payload),
      e.meta === undefined ? null : metaText(e.meta),
    );
  }
  const first = b.events[0] as Envelope;
  const last = b.events[b.events.length - 1] as Envelope;
  if (known.size > 10_000) known.clear();
  known.set(id, { head: last.seq, status: b.status, fence: b.fence });
  if (row.status === undefined) {
    q.insertExecution.run({ id, flow: b.flow ?? "", status: b.status, at0: first.at });
  } else if (row.status !== b.status) {
    q.setStatus.run({ id, status: b.status });
  }
  if (b.releaseLease !== undefined) q.releaseLease.run(id, b.releaseLease, b.fence);
  if (b.snapshot) q.saveSnapshot.run(id, b.snapshot.seq, b.snapshot.stateJson);
  if (b.notice) {
    q.pruneNotices.run(last.at - NOTICE_TTL_MS);
    q.postNotice.run(b.notice.owner, id, b.notice.kind, last.at);
  }
  const ix = b.index;
  if (!ix) return;
  // S15: other executions' wake rows, in this batch's transaction.
  for (const w of ix.wakes ?? []) q.setTimer.run(w.executionId, w.timerId, w.wakeAtMs);
  if (ix.clearAllTimers) {
    q.clearTimers.run(id);
    return;
  }
  for (const t of ix.timersCleared) q.clearTimer.run(id, t);
  for (const t of ix.timersSet) q.setTimer.run(id, t.timerId, t.wakeAtMs);
}
