/** Issue 10's acceptance on SQLite (test/support/trust-suite.ts): the file and its WAL, byte for byte. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll } from "vitest";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { trustSuite, type RawRow } from "./support/trust-suite.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-trust-"));
let n = 0;
let path = join(dir, `t${n}.db`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Events live in `events` or, until they settle, in `events_hot` (docs/decisions/0006). */
const TABLES = ["events", "events_hot"];

function withDb<T>(fn: (db: Database.Database) => T): T {
  const db = new Database(path);
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

trustSuite({
  name: "SQLite",
  async open() {
    return sqliteStore(path);
  },
  async row(id, seq) {
    return withDb((db) => {
      for (const t of TABLES) {
        const row = db
          .prepare<[string, number], RawRow>(
            `SELECT kind, at, payload, meta FROM ${t} WHERE execution_id = ? AND seq = ?`,
          )
          .get(id, seq);
        if (row) return row;
      }
      return undefined;
    });
  },
  async setRow(id, seq, row) {
    withDb((db) => {
      for (const t of TABLES) {
        db.prepare(
          `UPDATE ${t} SET kind = ?, at = ?, payload = ?, meta = ? WHERE execution_id = ? AND seq = ?`,
        ).run(row.kind, row.at, row.payload, row.meta, id, seq);
      }
    });
  },
  async deleteRow(id, seq) {
    withDb((db) => {
      for (const t of TABLES) {
        db.prepare(`DELETE FROM ${t} WHERE execution_id = ? AND seq = ?`).run(id, seq);
      }
    });
  },
  async dump() {
    const files = [path, `${path}-wal`].filter((f) => existsSync(f));
    return Buffer.concat(files.map((f) => readFileSync(f)));
  },
  async reset() {
    n++;
    path = join(dir, `t${n}.db`);
  },
});
