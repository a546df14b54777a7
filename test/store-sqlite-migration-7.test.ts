/**
 * SQLite migration 7 (issue 25: forks by origin S21, members S22, a schedule's pause S23): a file
 * of the version before it, with a schedule, an execution and a held lease in it, upgrades when a
 * store opens it, and keeps what it held.
 */
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { MIGRATIONS } from "../src/store/sqlite/migrations.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-m7-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const BEFORE = 6;

describe("SQLite migration 7", () => {
  it("upgrades a file of version 6 with data in it: schedules unpaused, leases found by owner, forks recorded", async () => {
    const path = join(dir, "v6.db");
    const db = new Database(path);
    MIGRATIONS.slice(0, BEFORE).forEach((sql) => db.exec(sql));
    db.pragma(`user_version = ${BEFORE}`);
    db.prepare(
      `INSERT INTO schedules (name, flow, cron, timezone, input, from_ms, cursor_ms)
       VALUES ('nightly', 'f', '0 3 * * *', 'UTC', '{"a":1}', 10, 20)`,
    ).run();
    db.prepare(
      "INSERT INTO leases (execution_id, owner, fence, expires_at) VALUES ('old', 'w', 3, 5000)",
    ).run();
    db.close();
    const store = sqliteStore(path);
    try {
      expect(await store.listSchedules()).toEqual([
        {
          name: "nightly",
          flow: "f",
          cron: "0 3 * * *",
          timezone: "UTC",
          input: { a: 1 },
          fromMs: 10,
          cursorMs: 20,
          paused: false,
        },
      ]);
      expect(await store.leasesOf("w", 1000, 10)).toEqual([
        { executionId: "old", fence: 3, expiresAtMs: 5000 },
      ]);
      expect(await store.members(0)).toEqual([]);
      expect(await store.forksOf("old", 10)).toEqual([]);
    } finally {
      await store.close();
    }
    const after = new Database(path, { readonly: true });
    expect(after.pragma("user_version", { simple: true })).toBe(MIGRATIONS.length);
    after.close();
  });
});
