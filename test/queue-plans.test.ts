/**
 * Admission reads a queue's own executions (postgres/queues.ts Q5, sqlite/queues.ts): on SQLite,
 * its count walks `executions_by_queue` by queue and status and its candidates
 * `executions_queued` in admission order, never the executions of the whole store. (PostgreSQL's
 * plans: test/queue-admission.pg.test.ts.) And a file at version 8 upgrades to 9 keeping its
 * executions, none of them in a queue.
 */
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { ADMISSION_SQL } from "../src/store/sqlite/queues.ts";
import { MIGRATIONS } from "../src/store/sqlite/migrations.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-queue-plans-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("sqlite: admission's query plans (migration 9)", () => {
  it("counts by queue and status, and walks the queued ones in admission order", async () => {
    const path = join(dir, "plans.db");
    await sqliteStore(path, { synchronous: "NORMAL" }).close();
    const db = new Database(path);
    try {
      const plan = (sql: string) =>
        db
          .prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .all({ queue: "q", now: 0, flows: '["f"]' })
          .map((r) => (r as { detail: string }).detail)
          .join("; ");
      const active = plan(ADMISSION_SQL.active);
      expect(active).toContain("executions_by_queue (queue=? AND status=?)");
      const admissible = plan(ADMISSION_SQL.admissible);
      expect(admissible).toContain("executions_queued (queue=?)");
      expect(admissible).not.toContain("TEMP B-TREE FOR ORDER BY");
    } finally {
      db.close();
    }
  });

  it("migration 9 upgrades a file at version 8: its executions are in no queue", async () => {
    const path = join(dir, "v8.db");
    const db = new Database(path);
    MIGRATIONS.slice(0, 8).forEach((sql) => db.exec(sql));
    db.pragma("user_version = 8");
    db.prepare(
      "INSERT INTO executions (id, flow, status, created_at, n) VALUES ('old', 'f', 'running', 5, 1)",
    ).run();
    db.prepare("UPDATE counters SET value = 1 WHERE name = 'execution'").run();
    db.close();
    const store = sqliteStore(path, { synchronous: "NORMAL" });
    try {
      const [old] = await store.list();
      expect(old?.executionId).toBe("old");
      expect(old).not.toHaveProperty("queue");
      expect(await store.queueNames()).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
