/**
 * PostgreSQL migration 6, the list's columns (spi.ts S24): a schema at the version before, with
 * logs as that release wrote them, upgrades with each execution's principal and spend filled in
 * SQL from its log (test/support/list-columns.ts), and the list sorts and filters by them; and
 * the plans of a sorted or filtered list at 10,000 executions use the indexes (list-sql.ts LS1).
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kindCode } from "../src/store/kind-codes.ts";
import { tables } from "../src/store/postgres/db.ts";
import { APPEND_ROUTINE } from "../src/store/postgres/tables.ts";
import { listColumns, MIGRATIONS } from "../src/store/postgres/migrations.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import { OLD_LOGS, spentFields, UPGRADED } from "./support/list-columns.ts";

const url = pgUrl();
const schemas: string[] = [];
const admin = new pg.Client({ connectionString: url });
beforeAll(() => admin.connect());
afterAll(async () => {
  await admin.end();
  await dropSchema(url, ...schemas);
});

const BEFORE = MIGRATIONS.indexOf(listColumns);

async function previousSchema(): Promise<string> {
  const schema = schemaName("listcols");
  schemas.push(schema);
  const t = tables(schema);
  await admin.query(`CREATE SCHEMA "${schema}"`);
  await admin.query(`CREATE TABLE ${t.migrations} (
    version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
  for (const [i, sql] of MIGRATIONS.slice(0, BEFORE).entries()) {
    await admin.query(sql(t));
    await admin.query(`INSERT INTO ${t.migrations} (version) VALUES ($1)`, [i + 1]);
  }
  for (const [id, log] of Object.entries(OLD_LOGS)) {
    const last = log[log.length - 1];
    const { rows } = await admin.query<{ n: number }>(
      `INSERT INTO ${t.executions} (id, flow, status, head, created_at, updated_at)
       VALUES ($1, 'f', 'running', $2, $3, $4) RETURNING n`,
      [id, last?.[0], log[0]?.[2], last?.[2]],
    );
    for (const [seq, kind, at, payload, meta] of log) {
      await admin.query(
        `INSERT INTO ${t.events} (x, seq, at, fence, kind, kind_name, payload, meta)
         VALUES ($1, $2, $3, NULL, $4, NULL, $5, $6)`,
        [rows[0]?.n, seq, at, kindCode(kind), payload, meta],
      );
    }
  }
  return schema;
}

describe("postgres migration 6: the list's columns (S24)", () => {
  it("fills each old execution's principal and spend from its log, in SQL, and lists by them", async () => {
    const schema = await previousSchema();
    const store = await postgresStore({ connectionString: url, schema, pool: { max: 2 } });
    try {
      const rows = await store.list();
      expect(Object.fromEntries(rows.map((x) => [x.executionId, spentFields(x)]))).toEqual(
        UPGRADED,
      );
      const ids = async (q: Parameters<typeof store.list>[0]) =>
        (await store.list(q)).map((x) => x.executionId);
      expect(await ids({ principal: "bob" })).toEqual(["m-2"]);
      expect(await ids({ sort: "cost", order: "desc", limit: 2 })).toEqual(["m-1", "m-4"]);
      // The migration's helper is gone; the new routine is installed beside the old one.
      const { rows: fns } = await admin.query<{ proname: string }>(
        `SELECT p.proname FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace
         WHERE s.nspname = $1 ORDER BY 1`,
        [schema],
      );
      expect(fns.map((f) => f.proname)).toEqual([APPEND_ROUTINE]);
    } finally {
      await store.close();
    }
  });

  it("LS1: at 10,000 executions a list by cost or created, or by principal, walks an index", async () => {
    const schema = schemaName("listplan");
    schemas.push(schema);
    await (await postgresStore({ connectionString: url, schema, pool: { max: 1 } })).close();
    const t = tables(schema);
    await admin.query(
      `INSERT INTO ${t.executions} (id, flow, status, head, created_at, updated_at, principal, cost_usd)
       SELECT 'e-' || lpad(g::text, 6, '0'), 'f', 'completed', 1, g, g + 1,
         CASE WHEN g % 2000 = 0 THEN 'rare' ELSE 'p' || (g % 50) END, CASE WHEN g % 3 = 0 THEN NULL ELSE g / 1000.0 END
       FROM generate_series(1, 10000) AS g`,
    );
    await admin.query(`ANALYZE ${t.executions}`);
    const plan = async (where: string, order: string) => {
      const { rows } = await admin.query<{ "QUERY PLAN": string }>(
        `EXPLAIN SELECT id FROM ${t.executions} ${where} ORDER BY ${order} LIMIT 51`,
      );
      return rows.map((r) => r["QUERY PLAN"]).join("\n");
    };
    const cost = await plan(
      "WHERE (coalesce(cost_usd, 0), id) < (5, 'e-005000')",
      "coalesce(cost_usd, 0) DESC, id DESC",
    );
    expect(cost).toContain("executions_by_cost");
    expect(cost).not.toContain("Sort");
    expect(await plan("", "created_at, id")).toContain("executions_by_created");
    // A common principal is found as fast walking the ids; a rare one needs its index.
    expect(await plan("WHERE principal = 'rare'", "id")).toContain("executions_by_principal");
  });
});
