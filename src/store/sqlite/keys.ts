/**
 * Key material on SQLite (S19): one row per key in the `keys` table (migration 5).
 *
 * K1. `putKey` inserts unless a row exists and reads the stored row back in one `BEGIN IMMEDIATE`
 *     transaction, so of two processes putting one id both get the material that won.
 * K2. `destroyKey` leaves no copy of the material in the database file or its WAL. Every write to
 *     the table (a put too) runs with `secure_delete` on, which overwrites with zeros the bytes it
 *     frees: a deleted row, and the old place of a row that a page split or defragmentation moved
 *     (with it off, a put that splits a page leaves copies of its neighbours' material behind,
 *     which no later delete reaches). After the delete a `wal_checkpoint(TRUNCATE)` writes the
 *     scrubbed page over the database file's copy and empties the WAL, whose older frames held
 *     the row. A connection reading an older snapshot (another process's read transaction) keeps
 *     the checkpoint from finishing: it waits for it as for any lock, up to the store's
 *     `busyTimeoutMs`, and if the reader is still there the destroy says so (`unconfirmed`,
 *     issue 22) instead of claiming the bytes gone; the frames go when the WAL is next
 *     checkpointed and truncated, which a second destroy of the same id does.
 * K3. `listKeys` reads an index range (../key-range.ts K2): ids in byte order, the BINARY
 *     collation's.
 */
import type Database from "better-sqlite3";
import { InvariantViolation } from "../../kernel/errors.ts";
import { prefixEnd, wellFormedKey } from "../key-range.ts";
import type { KeyDestruction, KeyStore } from "../spi.ts";

/** K2: why a destroy is not confirmed while a reader holds the WAL. */
const READER_HOLDS_WAL =
  "a reader (a read transaction in another connection or process) held an older snapshot of the database past the busy timeout, so the WAL, which still holds the key's bytes, could not be checkpointed and truncated; erase again once that reader ends";

export function sqliteKeys(db: Database.Database): KeyStore {
  const insert = db.prepare("INSERT INTO keys (id, material) VALUES (?, ?) ON CONFLICT DO NOTHING");
  const get = db.prepare<[string], string>("SELECT material FROM keys WHERE id = ?").pluck();
  const from = db
    .prepare<[string], string>("SELECT id FROM keys WHERE id >= ? ORDER BY id")
    .pluck();
  const range = db
    .prepare<[string, string], string>("SELECT id FROM keys WHERE id >= ? AND id < ? ORDER BY id")
    .pluck();
  const remove = db.prepare("DELETE FROM keys WHERE id = ?");
  const putTx = db.transaction((keyId: string, material: string): string => {
    insert.run(keyId, material);
    // Read back, not assumed: the row may be another process's, put before this one.
    const stored = get.get(keyId);
    if (stored === undefined) throw new InvariantViolation(`key ${keyId} not stored by its put`);
    return stored;
  });

  /** K2: runs `write` with `secure_delete` on, and then sets it back as it was. */
  function scrubbing<T>(write: () => T): T {
    const was = db.pragma("secure_delete", { simple: true });
    // 2 is FAST (zeros only what costs no extra write), which the pragma takes by name only.
    const restore = was === 2 ? "FAST" : was === 1 ? "ON" : "OFF";
    db.pragma("secure_delete = ON");
    try {
      return write();
    } finally {
      db.pragma(`secure_delete = ${restore}`);
    }
  }

  /** K2: whether the WAL was checkpointed and emptied (busy 0: no reader held it). */
  function truncated(): boolean {
    try {
      const rows = db.pragma("wal_checkpoint(TRUNCATE)") as { busy: number }[];
      return rows[0]?.busy === 0;
    } catch {
      // SQLITE_BUSY past the timeout (another writer's checkpoint): not confirmed either.
      return false;
    }
  }

  return {
    async putKey(keyId, material) {
      return scrubbing(() => putTx.immediate(keyId, material));
    },

    async getKey(keyId) {
      return get.get(keyId);
    },

    async listKeys(prefix) {
      const low = wellFormedKey(prefix);
      const high = prefixEnd(low);
      return high === undefined ? from.all(low) : range.all(low, high);
    },

    async destroyKey(keyId): Promise<KeyDestruction> {
      const existed = scrubbing(() => remove.run(keyId).changes > 0);
      return truncated() ? { existed } : { existed, unconfirmed: READER_HOLDS_WAL };
    },
  };
}
