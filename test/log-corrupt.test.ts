/** Issue 21 item 3 on SQLite (test/support/log-corrupt-suite.ts): a row spoiled in the file. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { initialState } from "../src/fold/state.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { logCorruptSuite } from "./support/log-corrupt-suite.ts";
import { EVENT_TABLES, OF_EXECUTION } from "./support/sqlite-rows.ts";

logCorruptSuite("SQLite", async () => {
  const dir = mkdtempSync(join(tmpdir(), "loom-corrupt-"));
  const path = join(dir, "loom.db");
  const store = sqliteStore(path);
  return {
    store,
    flags: ["--db", path],
    async spoil(id, seq) {
      const db = new Database(path);
      try {
        let changed = 0;
        for (const t of EVENT_TABLES) {
          const sql = `UPDATE ${t} SET payload = '{not json' WHERE ${OF_EXECUTION} AND seq = ?`;
          changed += db.prepare(sql).run(id, seq).changes;
        }
        if (changed !== 1) throw new Error(`spoiled ${changed} rows`);
      } finally {
        db.close();
      }
    },
    async dispose() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe("a spoiled snapshot on SQLite (issue 21 item 3)", () => {
  it("loadSnapshot raises LogCorruptError naming the execution and the snapshot's seq", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-corrupt-"));
    const path = join(dir, "loom.db");
    const store = sqliteStore(path);
    try {
      await store.saveSnapshot("aa", { seq: 3, state: initialState("aa") });
      const db = new Database(path);
      db.prepare("UPDATE snapshots SET state = '{not json' WHERE execution_id = 'aa'").run();
      db.close();
      await expect(store.loadSnapshot("aa")).rejects.toMatchObject({
        code: "LOOM_LOG_CORRUPT",
        details: { executionId: "aa", seq: 3 },
      });
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
