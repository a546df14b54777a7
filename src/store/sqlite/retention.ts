/**
 * Retention and compaction on SQLite (S13, S14): each one `BEGIN IMMEDIATE` transaction over
 * both event tables (`events` and the append-ordered `events_hot`), so a reader or another
 * process sees an execution whole or gone, and a log compacted or not, never half of either.
 */
import type Database from "better-sqlite3";
import { CompactionWithoutSnapshotError } from "../../kernel/errors.ts";
import type { EventKind } from "../../kernel/events.ts";
import type { RetentionStore } from "../spi.ts";
import { kindCell } from "./row-codec.ts";
import { keyOf } from "./statements.ts";

/**
 * `forget(id)` drops what the store's append path caches about `id` (its head, status and
 * fence), which a delete by this connection makes stale: `PRAGMA data_version` moves only for
 * other connections' commits.
 */
export function sqliteRetention(
  db: Database.Database,
  headOf: (id: string) => string,
  forget: (id: string) => void,
): RetentionStore {
  // The events go first: they are found by the key their executions row holds (row-codec.ts C1).
  const tables = ["events", "events_hot", "executions", "leases", "timers", "snapshots"] as const;
  const where = (t: (typeof tables)[number]): string =>
    t === "executions"
      ? "id = ?"
      : t.startsWith("events")
        ? `x = ${keyOf("?")}`
        : "execution_id = ?";
  const deletes = tables.map((t) => db.prepare(`DELETE FROM ${t} WHERE ${where(t)}`));
  // S21: the rows where it is the fork or the origin.
  const deleteForks = db.prepare("DELETE FROM forks WHERE fork_id = @id OR origin_id = @id");
  const snapshotSeq = db
    .prepare<[string], number>("SELECT seq FROM snapshots WHERE execution_id = ?")
    .pluck();
  const head = db.prepare<{ id: string }, number | null>(`SELECT ${headOf("@id")}`).pluck();
  // The kinds kept arrive as one JSON array of their codes (row-codec.ts C2), so one prepared
  // statement serves any list.
  const compactions = ["events", "events_hot"].map((t) =>
    db.prepare(
      `DELETE FROM ${t} WHERE x = ${keyOf("@id")} AND seq <= @through
         AND kind NOT IN (SELECT value FROM json_each(@keep))`,
    ),
  );

  const deleteTx = db.transaction((id: string): boolean => {
    let changes = 0;
    for (const d of deletes) changes += d.run(id).changes;
    deleteForks.run({ id });
    return changes > 0;
  });

  const compactTx = db.transaction(
    (id: string, throughSeq: number, keepKinds: readonly EventKind[]): number => {
      const snap = snapshotSeq.get(id);
      if (snap === undefined || snap < throughSeq) {
        throw new CompactionWithoutSnapshotError(
          `execution "${id}" has no snapshot at or past sequence ${throughSeq}: nothing compacted`,
          { executionId: id, throughSeq, snapshotSeq: snap ?? null },
        );
      }
      const last = head.get({ id }) ?? -1;
      // The last event stays whatever its kind: it anchors the head and the last-update time.
      const through = Math.min(throughSeq, last - 1);
      const params = { id, through, keep: JSON.stringify(keepKinds.map(kindCell)) };
      let removed = 0;
      for (const c of compactions) removed += c.run(params).changes;
      return removed;
    },
  );

  return {
    async deleteExecution(id) {
      try {
        return deleteTx.immediate(id);
      } finally {
        forget(id);
      }
    },
    async compact(id, throughSeq, keepKinds) {
      return compactTx.immediate(id, throughSeq, keepKinds);
    },
  };
}
