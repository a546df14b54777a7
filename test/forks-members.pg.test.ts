/**
 * Issue 25 on PostgreSQL: migration 5 (forks by origin, members, a schedule's pause) upgrades a
 * schema of the version before it with data in it; a fork made through the runtime goes through
 * the append routine, which writes its row (append-routine.ts R11; the fast path never takes one,
 * append-fast.ts F1); and a fleet's members see each other (members.ts M1, M3).
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, flow$, type Runtime } from "../src/index.ts";
import { postgresStore, type PostgresStore } from "../src/store/postgres/index.ts";
import { tables } from "../src/store/postgres/db.ts";
import { fastShape } from "../src/store/postgres/append-fast.ts";
import { forksMembersPauses, MIGRATIONS } from "../src/store/postgres/migrations.ts";
import { APPEND_ROUTINE } from "../src/store/postgres/tables.ts";
import { indexChanges } from "../src/fold/index-changes.ts";
import { until } from "./helpers.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

const url = pgUrl();
const schemas: string[] = [];
const admin = new pg.Client({ connectionString: url });
const opened: (PostgresStore | Runtime)[] = [];
beforeAll(() => admin.connect());
afterAll(async () => {
  for (const x of opened.reverse()) await x.close();
  await admin.end();
  await dropSchema(url, ...schemas);
});

/** The version before migration 5, whatever was appended after it. */
const BEFORE = MIGRATIONS.indexOf(forksMembersPauses);

async function store(schema: string): Promise<PostgresStore> {
  const s = await postgresStore({ connectionString: url, schema });
  opened.push(s);
  return s;
}

function fresh(what: string): string {
  const schema = schemaName(what);
  schemas.push(schema);
  return schema;
}

const steps = flow$("steps", async (ctx) => {
  const a = await ctx.run("a", () => 1);
  const b = await ctx.run("b", () => a + 1);
  return (await ctx.suspend<number>()) + b;
});

describe("migration 5 (forks, members, pauses)", () => {
  it("upgrades a schema of the previous version with a schedule, an execution and a held lease in it", async () => {
    const schema = fresh("m5");
    const t = tables(schema);
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(`CREATE TABLE ${t.migrations} (
      version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
    for (const [i, sql] of MIGRATIONS.slice(0, BEFORE).entries()) {
      await admin.query(sql(t));
      await admin.query(`INSERT INTO ${t.migrations} (version) VALUES ($1)`, [i + 1]);
    }
    await admin.query(
      `INSERT INTO ${t.schedules} (name, flow, cron, timezone, input, from_ms, cursor_ms)
       VALUES ('nightly', 'f', '0 3 * * *', 'UTC', '{"a":1}', 10, 20)`,
    );
    await admin.query(
      `INSERT INTO ${t.executions} (id, flow, status, head, created_at, updated_at)
       VALUES ('old', 'f', 'running', 0, 10, 10)`,
    );
    await admin.query(
      `INSERT INTO ${t.leases} (execution_id, owner, fence, expires_at) VALUES ('old', 'w', 3, 5000)`,
    );
    const s = await store(schema);
    const versions = await admin.query<{ version: number }>(
      `SELECT version FROM ${t.migrations} ORDER BY version`,
    );
    expect(versions.rows.map((r) => r.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    expect(await s.listSchedules()).toEqual([
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
    expect(await s.leasesOf("w", 1000, 10)).toEqual([
      { executionId: "old", fence: 3, expiresAtMs: 5000 },
    ]);
    expect(await s.forksOf("old", 10)).toEqual([]);
    expect(await s.members(0)).toEqual([]);
    const routine = await admin.query<{ found: string | null }>(
      `SELECT to_regproc($1)::text AS found`,
      [`"${schema}".${APPEND_ROUTINE}`],
    );
    expect(routine.rows[0]?.found).not.toBeNull();
  });
});

describe("forks through the routine, members of a fleet", () => {
  it("R11, F1: a fork made by the runtime has its row; its batch is never the fast path's", async () => {
    const schema = fresh("forks");
    const r = createRuntime({ store: await store(schema), closeStore: false, pollIntervalMs: 20 });
    opened.push(r);
    r.registerFlow(steps);
    await r.start(steps, null, { id: "origin" });
    await until(async () => (await r.getState("origin")).status === "parked");
    await r.fork("origin", 2, "f2");
    await r.fork("origin", 1, "f1");
    expect(await r.forksOf("origin")).toEqual([
      { executionId: "f2", seq: 2 },
      { executionId: "f1", seq: 1 },
    ]);
    // F1: the V1 batch of a fork (a start: claim at 0, fence 1) is refused by the fast path.
    const log = await r.readLog("f1");
    const events = log.map((e) => ({ ...e, executionId: "f9" }));
    const batch = {
      executionId: "f9",
      events,
      expectedSeq: 0,
      fence: 1,
      status: "running" as const,
      index: indexChanges(events),
      claimLease: { owner: "w", expiresAtMs: 1 },
    };
    expect(batch.index?.forkedFrom).toEqual({ executionId: "origin", seq: 1 });
    expect(fastShape(batch)).toBeUndefined();
    expect(fastShape({ ...batch, index: undefined })).toBeDefined();
  });

  it("M1, M3: a dashboard's runtime sees the fleet's members sharing the schema, with their leases", async () => {
    const schema = fresh("members");
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const held = flow$("held", async (ctx) => ctx.run("wait", () => gate.then(() => 1)));
    const worker = createRuntime({
      store: await store(schema),
      closeStore: false,
      ownerId: "worker-1",
      pollIntervalMs: 20,
    });
    opened.push(worker);
    worker.registerFlow(held);
    await worker.start(held, null, { id: "driven" });
    const ui = createRuntime({ store: await store(schema), closeStore: false, background: false });
    opened.push(ui);
    await until(async () => (await ui.fleet()).members[0]?.leases.length === 1);
    const [member] = (await ui.fleet()).members;
    expect(member).toMatchObject({ owner: "worker-1", flows: ["held"], pid: process.pid });
    expect(member?.leases.map((l) => l.executionId)).toEqual(["driven"]);
    release();
    await worker.waitForCompletion("driven");
    await worker.close();
    expect((await ui.fleet()).members).toEqual([]);
  });
});
