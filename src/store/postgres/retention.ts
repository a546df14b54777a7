/**
 * Retention and compaction on PostgreSQL (S13, S14), each in one transaction, so a reader or
 * another process sees an execution whole or gone, and a log compacted or not, never half of
 * either. A delete locks the lease row and then the execution row, the order an append takes them
 * in (append.ts A1), so it waits for an append in flight instead of deadlocking with it.
 */
import type pg from "pg";
import { CompactionWithoutSnapshotError } from "../../kernel/errors.ts";
import type { RetentionStore } from "../spi.ts";
import { statement, transaction, type Tables } from "./db.ts";
import { kindLists } from "./event-rows.ts";

export function postgresRetention(pool: pg.Pool, t: Tables): RetentionStore {
  const s = {
    lockLease: statement(
      "delete_lock_lease",
      `SELECT 1 FROM ${t.leases} WHERE execution_id = $1 FOR UPDATE`,
    ),
    lockExecution: statement(
      "delete_lock_execution",
      `SELECT 1 FROM ${t.executions} WHERE id = $1 FOR UPDATE`,
    ),
    // S13: the chain's inbox is not the execution's, and stays.
    delete: statement(
      "delete_execution",
      // E1: the events under the key of the executions row deleted beside them (every part
      // of the statement sees the rows as they were before it).
      `WITH e AS (DELETE FROM ${t.events}
           WHERE x = (SELECT n FROM ${t.executions} WHERE id = $1) RETURNING 1),
         x AS (DELETE FROM ${t.executions} WHERE id = $1 RETURNING 1),
         l AS (DELETE FROM ${t.leases} WHERE execution_id = $1 RETURNING 1),
         tm AS (DELETE FROM ${t.timers} WHERE execution_id = $1 RETURNING 1),
         s AS (DELETE FROM ${t.snapshots} WHERE execution_id = $1 RETURNING 1),
         -- S21: where it is the fork or the origin.
         fk AS (DELETE FROM ${t.forks} WHERE fork_id = $1 OR origin_id = $1)
       SELECT (SELECT count(*) FROM e) + (SELECT count(*) FROM x) + (SELECT count(*) FROM l)
         + (SELECT count(*) FROM tm) + (SELECT count(*) FROM s) AS removed`,
    ),
    covered: statement(
      "compact_covered",
      `SELECT (SELECT seq FROM ${t.snapshots} WHERE execution_id = $1 FOR SHARE) AS snapshot_seq,
         (SELECT head FROM ${t.executions} WHERE id = $1) AS head`,
    ),
    compact: statement(
      "compact",
      // E2: the kinds kept arrive as their codes ($3) and the names of those without one ($4);
      // a row holds exactly one of the two.
      `DELETE FROM ${t.events}
       WHERE x = (SELECT n FROM ${t.executions} WHERE id = $1) AND seq <= $2
         AND CASE WHEN kind IS NULL THEN kind_name <> ALL($4::text[])
           ELSE kind <> ALL($3::smallint[]) END`,
    ),
  };

  return {
    async deleteExecution(id) {
      return transaction(pool, async (tx) => {
        tx.send(s.lockLease([id]));
        tx.send(s.lockExecution([id]));
        const { rows } = await tx.query<{ removed: number }>(s.delete([id]));
        return (rows[0]?.removed ?? 0) > 0;
      });
    },

    async compact(id, throughSeq, keepKinds) {
      return transaction(pool, async (tx) => {
        const { rows } = await tx.query<{ snapshot_seq: number | null; head: number | null }>(
          s.covered([id]),
        );
        const snap = rows[0]?.snapshot_seq ?? null;
        if (snap === null || snap < throughSeq) {
          throw new CompactionWithoutSnapshotError(
            `execution "${id}" has no snapshot at or past sequence ${throughSeq}: nothing compacted`,
            { executionId: id, throughSeq, snapshotSeq: snap },
          );
        }
        // The last event stays whatever its kind: it anchors the head and the last-update time.
        const through = Math.min(throughSeq, (rows[0]?.head ?? -1) - 1);
        const keep = kindLists(keepKinds);
        const removed = await tx.query(s.compact([id, through, keep.codes, keep.names]));
        return removed.rowCount ?? 0;
      });
    },
  };
}
