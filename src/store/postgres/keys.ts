/**
 * Key material on PostgreSQL (S19): one row per key in the schema's `keys` table (migration 2).
 *
 * K1. A row is inserted and deleted, never updated, so the live row is its material's only row
 *     version. `putKey` inserts with ON CONFLICT DO NOTHING and, when a row was there, reads it in
 *     a statement of its own: the insert's snapshot, taken before a concurrent put committed,
 *     could not see that put's row (an upsert would see it, but would write a second version).
 * K2. `destroyKey` deletes the row and then rewrites the table, `VACUUM (FULL)`, outside any
 *     transaction (VACUUM cannot run in one) on a connection of the pool. A plain VACUUM prunes
 *     the dead row but leaves its bytes in the page's free space when no live row moves over
 *     them (the row put last on its page); the rewrite copies the live rows into new files and
 *     truncates the old ones. It holds the table's exclusive lock while it runs, so a `getKey`
 *     waits for it: a cost of the whole table per destroy, paid rarely.
 * K3. The rewrite copies the deleted row too while anyone may still see it (issue 22): a
 *     transaction older than the delete, in any database of the cluster, or a snapshot older than
 *     it in the table's database (a REPEATABLE READ reader, `pg_dump`), which has no transaction
 *     id of its own. So between the delete and the rewrite the destroy waits, up to
 *     `keyScrubWaitMs`, until every running transaction id is newer than the delete's and no
 *     session it can see (pg_stat_activity: all of them for a superuser or pg_read_all_stats,
 *     its own role's otherwise) holds a snapshot as old; and the rewrite waits for the table's
 *     lock no longer than what is left of that time (a reader holding a lock on the table).
 * K4. `listKeys` reads an index range (../key-range.ts K2): the ids are `COLLATE "C"`, in byte
 *     order, so no LIKE pattern (and no `%` or `_` in a prefix) is involved.
 * K5. `destroyKey` reports the scrub confirmed only on the server's word: the rewrite runs
 *     VERBOSE, and the count it reports of dead row versions it could not remove yet must be 0.
 *     Anything else (a count above 0, a lock not granted in time, a report it cannot read, as
 *     under a server whose messages are not in English) is `unconfirmed`, with why; a later
 *     destroy of the same id rewrites again (also when no row is left to delete) and confirms.
 *     What no rewrite reaches: the write-ahead log, its archive and backups, which keep the
 *     insert until they are recycled: the server's, not the store's.
 */
import type pg from "pg";
import { InvariantViolation } from "../../kernel/errors.ts";
import { prefixEnd, wellFormedKey } from "../key-range.ts";
import type { KeyDestruction, KeyStore } from "../spi.ts";
import { run, statement, type Tables } from "./db.ts";
import { rewriteKeys } from "./keys-rewrite.ts";

/** K1: how many times a put tries again when the row it found was destroyed before it read it. */
const PUT_ATTEMPTS = 5;
/** K3: how long a destroy waits, by default, for the readers older than its delete to end. */
export const KEY_SCRUB_WAIT_MS = 30_000;
const HORIZON_POLL_MAX_MS = 200;

export function postgresKeys(
  pool: pg.Pool,
  t: Tables,
  waitMs: number = KEY_SCRUB_WAIT_MS,
): KeyStore {
  const s = {
    insert: statement(
      "put_key",
      `INSERT INTO ${t.keys} (id, material) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
    ),
    get: statement("get_key", `SELECT material FROM ${t.keys} WHERE id = $1`),
    listFrom: statement("list_keys_from", `SELECT id FROM ${t.keys} WHERE id >= $1 ORDER BY id`),
    listRange: statement(
      "list_keys_range",
      `SELECT id FROM ${t.keys} WHERE id >= $1 AND id < $2 ORDER BY id`,
    ),
    // The transaction id is taken even when nothing is deleted: a destroy run again after a failed
    // rewrite waits for it as for the delete before it (K3).
    destroy: statement(
      "destroy_key",
      `WITH d AS (DELETE FROM ${t.keys} WHERE id = $1 RETURNING 1)
       SELECT (SELECT count(*) FROM d)::int AS deleted, pg_current_xact_id()::text AS xid`,
    ),
    // K3: whether every transaction running now, in any database, began after `xid`, and no
    // session this role can see holds a snapshot that could still see what `xid` deleted.
    passed: statement(
      "key_horizon_passed",
      `SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::xid8
          AND NOT EXISTS (SELECT 1 FROM pg_stat_activity
                          WHERE datname = current_database() AND pid <> pg_backend_pid()
                            AND backend_xmin IS NOT NULL
                            AND age(backend_xmin) >= age(xid($1::xid8))) AS passed`,
    ),
  };

  /** K3: waits until no reader older than `xid` is left, or `deadline` (epoch ms) passed. */
  const horizonPassed = async (xid: string, deadline: number): Promise<void> => {
    for (let pauseMs = 5; ; pauseMs = Math.min(pauseMs * 2, HORIZON_POLL_MAX_MS)) {
      const { rows } = await run<{ passed: boolean }>(pool, s.passed([xid]));
      if (rows[0]?.passed === true || Date.now() >= deadline) return;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  };

  const get = async (keyId: string): Promise<string | undefined> => {
    const { rows } = await run<{ material: string }>(pool, s.get([keyId]));
    return rows[0]?.material;
  };

  return {
    async putKey(keyId, material) {
      for (let attempt = 1; attempt <= PUT_ATTEMPTS; attempt++) {
        const inserted = await run(pool, s.insert([keyId, material]));
        if (inserted.rowCount === 1) return material;
        const stored = await get(keyId);
        if (stored !== undefined) return stored;
      }
      throw new InvariantViolation(
        `key ${keyId} was destroyed as often as it was put, ${PUT_ATTEMPTS} times`,
      );
    },

    getKey: get,

    async listKeys(prefix) {
      const low = wellFormedKey(prefix);
      const high = prefixEnd(low);
      const query = high === undefined ? s.listFrom([low]) : s.listRange([low, high]);
      const { rows } = await run<{ id: string }>(pool, query);
      return rows.map((r) => r.id);
    },

    async destroyKey(keyId): Promise<KeyDestruction> {
      const deadline = Date.now() + waitMs;
      const { rows } = await run<{ deleted: number; xid: string }>(pool, s.destroy([keyId]));
      const row = rows[0];
      if (!row) throw new InvariantViolation(`the delete of key ${keyId} answered no row`);
      await horizonPassed(row.xid, deadline);
      // K2, K5: also when no row was deleted: a destroy not confirmed is completed so.
      const unconfirmed = await rewriteKeys(pool, t.keys, Math.max(1, deadline - Date.now()));
      const existed = row.deleted > 0;
      return unconfirmed === undefined ? { existed } : { existed, unconfirmed };
    },
  };
}
