/**
 * The PostgreSQL row format of migration 4 (src/store/postgres/event-rows.ts E1..E4): a schema
 * made by the migrations before it, with rows as that release wrote them, upgrades with its
 * logs readable as the same envelopes; and what a row holds now.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppendBatch } from "../src/store/spi.ts";
import { LogCorruptError } from "../src/kernel/errors.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { tables } from "../src/store/postgres/db.ts";
import { leanEventRows, MIGRATIONS } from "../src/store/postgres/migrations.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

const url = pgUrl();
const schemas: string[] = [];
const admin = new pg.Client({ connectionString: url });
beforeAll(() => admin.connect());
afterAll(async () => {
  await admin.end();
  await dropSchema(url, ...schemas);
});

/** The version before migration 4, whatever was appended after it. */
const BEFORE = MIGRATIONS.indexOf(leanEventRows);

/** Old rows: [id, seq, kind, at, payload, meta]. */
const OLD_EVENTS: [string, number, string, number, string, string | null][] = [
  ["b-old", 0, "EXECUTION_STARTED", 10, '{"flow":"f"}', '{"fence":1}'],
  ["b-old", 1, "STEP_COMPLETED", 11, '{"callId":"s#0","output":1}', '{"fence":1}'],
  ["b-old", 2, "EXECUTION_COMPLETED", 12, '{"output":1}', '{"kernel":true,"fence":1}'],
  ["a-old", 0, "EXECUTION_STARTED", 20, '{"flow":"f"}', '{"fence":2,"hash":"h"}'],
  ["a-old", 1, "DECISION_RECORDED", 21, '{"callId":"d#0","value":2}', null],
  // A kind no code names, a fence past `integer`, a meta of spaces: kept as text.
  ["a-old", 2, "SOME_OLD_KIND", 22, "{}", '{"fence":3000000000}'],
  ["a-old", 3, "STEP_STARTED", 23, "{}", '{ "fence": 2 }'],
  ["a-old", 4, "STEP_COMPLETED", 24, "{}", '{"fence":2}'],
  // An event of no execution row (no log reads it): not carried over.
  ["orphan", 0, "EXECUTION_STARTED", 1, "{}", null],
];

/** A schema at the version before migration 4, rows written as that release's SQL did. */
async function previousSchema(): Promise<string> {
  const schema = schemaName("rows");
  schemas.push(schema);
  const t = tables(schema);
  await admin.query(`CREATE SCHEMA "${schema}"`);
  await admin.query(`CREATE TABLE ${t.migrations} (
    version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
  for (const [i, sql] of MIGRATIONS.slice(0, BEFORE).entries()) {
    await admin.query(sql(t));
    await admin.query(`INSERT INTO ${t.migrations} (version) VALUES ($1)`, [i + 1]);
  }
  await admin.query(
    `INSERT INTO ${t.executions} (id, flow, status, head, created_at, updated_at)
     VALUES ('b-old', 'f', 'completed', 2, 10, 12), ('a-old', 'f', 'running', 4, 20, 24)`,
  );
  for (const row of OLD_EVENTS) {
    await admin.query(
      `INSERT INTO ${t.events} (execution_id, seq, kind, at, payload, meta)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      row,
    );
  }
  await admin.query(
    `INSERT INTO ${t.leases} (execution_id, owner, fence, expires_at) VALUES ('a-old', 'w', 2, 1e12)`,
  );
  await admin.query(
    `INSERT INTO ${t.snapshots} (execution_id, seq, state) VALUES ('a-old', 1, '{"status":"running"}')`,
  );
  return schema;
}

const strip = (
  log: { seq: number; kind: string; at: number; payload: unknown; meta?: unknown }[],
) => log.map(({ seq, kind, at, payload, meta }) => ({ seq, kind, at, payload, meta }));

/** What each old row reads as: the same envelope it was appended as. */
const expected = (id: string) =>
  OLD_EVENTS.filter((r) => r[0] === id).map(([, seq, kind, at, payload, meta]) => ({
    seq,
    kind,
    at,
    payload: JSON.parse(payload) as unknown,
    meta: meta === null ? undefined : (JSON.parse(meta) as unknown),
  }));

const step = (id: string, seq: number, fence: number): AppendBatch => ({
  executionId: id,
  events: [
    { executionId: id, seq, kind: "STEP_COMPLETED", at: 30 + seq, payload: {}, meta: { fence } },
  ],
  expectedSeq: seq,
  fence,
  status: "running",
});

describe("postgres rows (migration 4)", () => {
  it("E1..E3: a schema made by the previous migrations upgrades, and its logs, heads and list read the same", async () => {
    const schema = await previousSchema();
    const store = await postgresStore({ connectionString: url, schema, pool: { max: 2 } });
    try {
      expect(strip(await store.read("b-old"))).toEqual(expected("b-old"));
      expect(strip(await store.read("a-old"))).toEqual(expected("a-old"));
      expect(strip(await store.read("a-old", 2, 2))).toEqual(expected("a-old").slice(2, 4));
      expect(await store.head("a-old")).toBe(4);
      expect((await store.list()).map((s) => [s.executionId, s.head, s.updatedAtMs])).toEqual([
        ["a-old", 4, 24],
        ["b-old", 2, 12],
      ]);
      expect((await store.loadSnapshot("a-old"))?.state).toEqual({ status: "running" });
      // The rows as migration 4 left them: codes, bare fences, and text where those cannot be.
      const { rows } = await admin.query(
        `SELECT e.id, ev.seq::int, ev.kind, ev.kind_name, ev.fence, ev.meta
         FROM "${schema}".events ev JOIN "${schema}".executions e ON e.n = ev.x
         ORDER BY e.id, ev.seq`,
      );
      expect(rows).toEqual([
        {
          id: "a-old",
          seq: 0,
          kind: 0,
          kind_name: null,
          fence: null,
          meta: '{"fence":2,"hash":"h"}',
        },
        { id: "a-old", seq: 1, kind: 6, kind_name: null, fence: null, meta: null },
        {
          id: "a-old",
          seq: 2,
          kind: null,
          kind_name: "SOME_OLD_KIND",
          fence: null,
          meta: '{"fence":3000000000}',
        },
        { id: "a-old", seq: 3, kind: 1, kind_name: null, fence: null, meta: '{ "fence": 2 }' },
        { id: "a-old", seq: 4, kind: 2, kind_name: null, fence: 2, meta: null },
        { id: "b-old", seq: 0, kind: 0, kind_name: null, fence: 1, meta: null },
        { id: "b-old", seq: 1, kind: 2, kind_name: null, fence: 1, meta: null },
        {
          id: "b-old",
          seq: 2,
          kind: 16,
          kind_name: null,
          fence: null,
          meta: '{"kernel":true,"fence":1}',
        },
      ]);
      // An old execution takes appends under its key; a new one gets its own.
      expect((await store.appendMany([step("a-old", 5, 2)]))[0]?.ok).toBe(true);
      expect(strip(await store.read("a-old", 5))).toEqual([
        { seq: 5, kind: "STEP_COMPLETED", at: 35, payload: {}, meta: { fence: 2 } },
      ]);
      // Compaction keeps the kinds named, by code and by name.
      await store.saveSnapshot("a-old", { seq: 4, state: {} as never });
      expect(await store.compact("a-old", 4, ["EXECUTION_STARTED", "SOME_OLD_KIND" as never])).toBe(
        3,
      );
      expect((await store.read("a-old")).map((e) => e.seq)).toEqual([0, 2, 5]);
      expect(await store.deleteExecution("b-old")).toBe(true);
      expect(await store.read("b-old")).toEqual([]);
      const left = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".events`);
      expect(left.rows[0]).toEqual({ n: 3 });
    } finally {
      await store.close();
    }
  });

  it("E2: a code no kind has is LogCorruptError naming the execution and seq", async () => {
    const schema = await previousSchema();
    const store = await postgresStore({ connectionString: url, schema, pool: { max: 2 } });
    try {
      await admin.query(
        `UPDATE "${schema}".events SET kind = 999
         WHERE x = (SELECT n FROM "${schema}".executions WHERE id = 'b-old') AND seq = 1`,
      );
      const read = store.read("b-old");
      await expect(read).rejects.toBeInstanceOf(LogCorruptError);
      await expect(read).rejects.toThrow(/"b-old".*seq 1/);
    } finally {
      await store.close();
    }
  });

  it("E1, E3, E4: a new log's rows hold its key, codes and bare fences, and read back as appended", async () => {
    const schema = schemaName("rows");
    schemas.push(schema);
    const store = await postgresStore({ connectionString: url, schema, pool: { max: 2 } });
    try {
      const events = [
        {
          executionId: "n",
          seq: 0,
          kind: "EXECUTION_STARTED" as const,
          at: 1,
          payload: { a: 1 },
          meta: { fence: 1 },
        },
        {
          executionId: "n",
          seq: 1,
          kind: "STEP_COMPLETED" as const,
          at: 2,
          payload: "x",
          meta: { fence: 1, hash: "h" },
        },
        { executionId: "n", seq: 2, kind: "STEP_COMPLETED" as const, at: 3, payload: null },
      ];
      const batch: AppendBatch = {
        executionId: "n",
        events,
        expectedSeq: 0,
        fence: 1,
        status: "running",
        flow: "f",
        claimLease: { owner: "w", expiresAtMs: 1e12 },
      };
      // Alone (the one-execution path) and beside another execution (the several path, R4).
      expect((await store.appendMany([batch]))[0]?.ok).toBe(true);
      const other = {
        ...batch,
        executionId: "m",
        events: events.map((e) => ({ ...e, executionId: "m" })),
      };
      const third = {
        ...batch,
        executionId: "o",
        events: events.map((e) => ({ ...e, executionId: "o" })),
      };
      expect((await store.appendMany([other, third])).map((o) => o.ok)).toEqual([true, true]);
      for (const id of ["n", "m", "o"]) {
        expect(await store.read(id)).toEqual(events.map((e) => ({ ...e, executionId: id })));
      }
      const { rows } = await admin.query<{ x: number; fixed: number }>(
        `SELECT x::int, seq::int, kind, kind_name, fence, meta,
           pg_column_size(e.*) - octet_length(payload) AS fixed
         FROM "${schema}".events e ORDER BY x, seq`,
      );
      const keys = [...new Set(rows.map((r) => r.x))];
      expect(keys).toHaveLength(3);
      expect(rows.slice(0, 3).map(({ fixed: _fixed, ...r }) => r)).toEqual([
        {
          x: keys[0],
          seq: 0,
          kind: 0,
          kind_name: null,
          fence: 1,
          meta: null,
        },
        {
          x: keys[0],
          seq: 1,
          kind: 2,
          kind_name: null,
          fence: null,
          meta: '{"fence":1,"hash":"h"}',
        },
        {
          x: keys[0],
          seq: 2,
          kind: 2,
          kind_name: null,
          fence: null,
          meta: null,
        },
      ]);
      // E4: the row past its payload is the key, seq, at, fence and kind (30 bytes), a text
      // header, and the composite's header (24 bytes: pg_column_size of a row value).
      expect(rows[0]?.fixed).toBeLessThanOrEqual(24 + 30 + 1);
    } finally {
      await store.close();
    }
  });
});
