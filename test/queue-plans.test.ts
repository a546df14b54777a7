/**
 * Admission reads a queue's own executions (postgres/queues.ts Q5, sqlite/queues.ts): on SQLite,
 * its count walks `executions_by_queue` by queue and status and its candidates
 * `executions_queued` in admission order, never the executions of the whole store. (PostgreSQL's
 * plans: test/queue-admission.pg.test.ts.)
 */
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { ADMISSION_SQL } from "../src/store/sqlite/queues.ts";

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
});
