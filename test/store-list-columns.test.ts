/**
 * SQLite migration 8, the list's columns (spi.ts S24): a file at the version before, with logs
 * as that release wrote them, upgrades with each execution's principal and spend filled from its
 * log (test/support/list-columns.ts), and the list sorts and filters by them; and the query plans
 * of a sorted or filtered list use the indexes (list-sql.ts LS1), not a sort of every row.
 */
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { kindCode } from "../src/store/kind-codes.ts";
import { listColumns, MIGRATIONS } from "../src/store/sqlite/migrations.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { listStatement } from "../src/store/sqlite/reads.ts";
import type { ListQuery } from "../src/store/spi.ts";
import { OLD_LOGS, spentFields, UPGRADED } from "./support/list-columns.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-list-columns-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
// By position: later migrations (issue 26) come after it.
const BEFORE = MIGRATIONS.indexOf(listColumns());

/** A file at the version before migration 8, the old logs in it (the last event of each hot). */
function previousFile(): string {
  const path = join(dir, `before-${Math.random().toString(36).slice(2)}.db`);
  const db = new Database(path);
  MIGRATIONS.slice(0, BEFORE).forEach((sql) => db.exec(sql));
  db.pragma(`user_version = ${BEFORE}`);
  const exec = db.prepare(
    "INSERT INTO executions (id, flow, status, created_at, n) VALUES (?, 'f', 'running', ?, ?)",
  );
  const settled = db.prepare(
    "INSERT INTO events (x, seq, kind, at, payload, meta) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const hot = db.prepare(
    "INSERT INTO events_hot (x, seq, kind, at, payload, meta) VALUES (?, ?, ?, ?, ?, ?)",
  );
  Object.entries(OLD_LOGS).forEach(([id, log], i) => {
    exec.run(id, log[0]?.[2] ?? 0, i + 1);
    log.forEach(([seq, kind, at, payload, meta], k) => {
      const into = k === log.length - 1 ? hot : settled;
      into.run(i + 1, seq, kindCode(kind) ?? kind, at, payload, meta);
    });
  });
  db.prepare("UPDATE counters SET value = ? WHERE name = 'execution'").run(10);
  db.close();
  return path;
}

describe("sqlite migration 8: the list's columns (S24)", () => {
  it("fills each old execution's principal and spend from its log, and lists by them", async () => {
    const store = sqliteStore(previousFile(), { synchronous: "NORMAL" });
    try {
      const rows = await store.list();
      expect(Object.fromEntries(rows.map((x) => [x.executionId, spentFields(x)]))).toEqual(
        UPGRADED,
      );
      const ids = async (q: Parameters<typeof store.list>[0]) =>
        (await store.list(q)).map((x) => x.executionId);
      expect(await ids({ principal: "bob" })).toEqual(["m-2"]);
      expect(await ids({ sort: "cost", order: "desc", limit: 2 })).toEqual(["m-1", "m-4"]);
      // An old execution's next metered batch writes its whole spend.
      const fence = (await store.acquireLease("m-2", "w", { ttlMs: 1000, nowMs: 0 }))?.fence ?? 0;
      const outcome = await store.appendMany([
        {
          executionId: "m-2",
          events: [{ executionId: "m-2", seq: 2, kind: "STEP_COMPLETED", at: 22, payload: {} }],
          expectedSeq: 2,
          fence,
          status: "running",
          spent: { costUsd: 3 },
        },
      ]);
      expect(outcome[0]?.ok).toBe(true);
      expect(await ids({ sort: "cost", order: "desc", limit: 1 })).toEqual(["m-2"]);
    } finally {
      await store.close();
    }
  });

  it("LS1: a list sorted by cost or created, or filtered by principal, walks an index", async () => {
    const path = previousFile();
    await sqliteStore(path, { synchronous: "NORMAL" }).close();
    const db = new Database(path);
    try {
      const plan = (query: ListQuery) => {
        const statement = listStatement(query);
        if (!statement) throw new Error("no statement");
        return db
          .prepare(`EXPLAIN QUERY PLAN ${statement.sql}`)
          .all(...statement.args)
          .map((r) => (r as { detail: string }).detail)
          .join("; ");
      };
      const cost = plan({ sort: "cost", order: "desc", afterId: "x", afterKey: 1, limit: 51 });
      expect(cost).toContain("executions_by_cost");
      expect(cost).not.toContain("TEMP B-TREE");
      const created = plan({ sort: "created", limit: 51 });
      expect(created).toContain("executions_by_created");
      expect(created).not.toContain("TEMP B-TREE");
      expect(plan({ principal: "alice", limit: 51 })).toContain("executions_by_principal");
      const first = plan({ limit: 51 });
      expect(first).not.toContain("TEMP B-TREE");
    } finally {
      db.close();
    }
  });
});
