/** Issue 10's acceptance on SQLite (test/support/trust-suite.ts): the file and its WAL, byte for byte. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll } from "vitest";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { EVENT_TABLES, OF_EXECUTION, textRows, writeTextRow } from "./support/sqlite-rows.ts";
import { trustSuite } from "./support/trust-suite.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-trust-"));
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

trustSuite({
  name: "SQLite",
  async open() {
    return sqliteStore(path);
  },
  async row(id, seq) {
    return withDb((db) => {
      const row = textRows(db, id).find((r) => r.seq === seq);
      return row && { kind: row.kind, at: row.at, payload: row.payload, meta: row.meta };
    });
  },
  async setRow(id, seq, row) {
    withDb((db) => writeTextRow(db, id, { seq, ...row }));
  },
  async deleteRow(id, seq) {
    withDb((db) => {
      for (const t of EVENT_TABLES) {
        db.prepare(`DELETE FROM ${t} WHERE ${OF_EXECUTION} AND seq = ?`).run(id, seq);
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
