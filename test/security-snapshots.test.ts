/** Issue 22's forged `snapshots` row on SQLite (test/support/snapshot-forgery.ts). */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll } from "vitest";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { snapshotText } from "../src/store/sqlite/snapshots.ts";
import { snapshotForgerySuite, type SnapshotRow } from "./support/snapshot-forgery.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-snapshots-"));
let n = 0;
let path = join(dir, `t${n}.db`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function withDb<T>(fn: (db: Database.Database) => T): T {
  const db = new Database(path);
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

snapshotForgerySuite({
  name: "SQLite",
  async open() {
    return sqliteStore(path);
  },
  async snapshotRow(id) {
    // A large state is kept deflated (src/store/sqlite/snapshots.ts N1): read as its text.
    const row = withDb((db) =>
      db
        .prepare<[string], { seq: number; state: string | Buffer }>(
          "SELECT seq, state FROM snapshots WHERE execution_id = ?",
        )
        .get(id),
    );
    return row && ({ seq: row.seq, state: snapshotText(row.state) } satisfies SnapshotRow);
  },
  async setSnapshotRow(id, row) {
    withDb((db) => {
      db.prepare(
        `INSERT INTO snapshots (execution_id, seq, state) VALUES (?, ?, ?)
         ON CONFLICT (execution_id) DO UPDATE SET seq = excluded.seq, state = excluded.state`,
      ).run(id, row.seq, row.state);
    });
  },
  async reset() {
    n++;
    path = join(dir, `t${n}.db`);
  },
});
