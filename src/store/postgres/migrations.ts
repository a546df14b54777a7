/**
 * The PostgreSQL schema as an ordered list of migrations. The position in the list is the version
 * (rows of the schema's `migrations` table); a migration is never edited once released, only
 * appended.
 *
 * M1. Migrations run when a store opens, in one transaction that first takes a transaction-scoped
 *     advisory lock named after the schema: processes opening one database at once wait for each
 *     other, and each applies only what the one before it did not (idempotent).
 * M2. Everything lives in the store's schema, created if it is missing.
 * M3. Routines (the append function, append-routine.ts) are code, not data: they are not versions
 *     of this list but are installed, in the same transaction, when the schema lacks the one this
 *     release calls, under a name that carries its version (R1). A schema made by an earlier
 *     release gets it the first time this release opens it.
 *
 * Ids and names are `COLLATE "C"`: ordered by their bytes, as the SQLite store orders them, so
 * `list` pages (`afterId`) the same whatever the database's collation. An execution's head and
 * last update live on its row (the append locks that row anyway); they are not indexed, so
 * updating them on every append is a HOT update that touches no index.
 */
import type pg from "pg";
import { APPEND_ROUTINE, APPEND_ROUTINE_ARGS, appendRoutineSql } from "./append-routine.ts";
import { tables, type Tables } from "./db.ts";
import { freeAtSql, RUNNABLE_SQL } from "./tables.ts";
import { wakeChannel } from "./wakes.ts";
import { bareFenceSql, kindCodeSql } from "./event-rows.ts";
import { kindCode } from "../kind-codes.ts";

/**
 * Migration 4, leaner event rows (issue 23 item 3, event-rows.ts E1..E4): an execution's events
 * are keyed by a `bigint` given once, on its executions row (`n`, an identity column never
 * written otherwise, so never repeated; not indexed: an execution is looked up by its id), the
 * kind is its code and a `{ fence }` meta the bare fence. The old rows are converted (the 22
 * kinds codes existed for then); an event with no executions row had no log to read and is not.
 * The routines of earlier releases name the old table's columns: a process of such a release
 * fails on its next append or read instead of writing rows this one could not read, so an
 * upgrade across this version stops the previous release's processes first (docs/postgres.md).
 */
export function leanEventRows(t: Tables): string {
  return `
  ALTER TABLE ${t.executions} ADD COLUMN n BIGINT GENERATED ALWAYS AS IDENTITY;
  CREATE TABLE ${t.events}_v4 (
    x BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    at BIGINT NOT NULL,
    fence INTEGER,
    kind SMALLINT,
    kind_name TEXT,
    payload TEXT NOT NULL,
    meta TEXT,
    CONSTRAINT events_v4_pkey PRIMARY KEY (x, seq)
  );
  INSERT INTO ${t.events}_v4 (x, seq, at, fence, kind, kind_name, payload, meta)
    SELECT e.n, ev.seq, ev.at, c.fence, c.kind,
      CASE WHEN c.kind IS NULL THEN ev.kind END, ev.payload,
      CASE WHEN c.fence IS NULL THEN ev.meta END
    FROM ${t.events} ev JOIN ${t.executions} e ON e.id = ev.execution_id,
      LATERAL (SELECT ${bareFenceSql("ev.meta")} AS fence,
        ${kindCodeSql("ev.kind", 22)} AS kind) AS c;
  DROP TABLE ${t.events};
  ALTER TABLE ${t.events}_v4 RENAME TO events;
  ALTER INDEX ${t.events}_v4_pkey RENAME TO events_pkey;
  `;
}

/**
 * Migration 5 (issue 25): forks by origin (S21; `id` is the order they were recorded in), the
 * fleet's members (S22) with the leases each holds found by owner (a partial index: only held
 * leases are in it, and a lease row's owner changes only where the claim index's key changes
 * anyway), and a schedule's pause (S23). Self-contained: it names only what it creates and the
 * two tables it alters.
 */
export function forksMembersPauses(t: Tables): string {
  return `
  CREATE TABLE ${t.forks} (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    origin_id TEXT COLLATE "C" NOT NULL,
    fork_id TEXT COLLATE "C" NOT NULL,
    seq BIGINT NOT NULL
  );
  CREATE INDEX forks_by_origin ON ${t.forks} (origin_id, id);
  CREATE INDEX forks_by_fork ON ${t.forks} (fork_id);
  CREATE TABLE ${t.members} (
    owner TEXT COLLATE "C" PRIMARY KEY,
    flows TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    host TEXT,
    pid INTEGER
  );
  CREATE INDEX leases_by_owner ON ${t.leases} (owner, execution_id) WHERE owner IS NOT NULL;
  ALTER TABLE ${t.schedules} ADD COLUMN paused BOOLEAN NOT NULL DEFAULT false;
  `;
}

/**
 * Migration 6, the list's columns (spi.ts S24, issue 25 item 4): who started each execution and
 * what it has spent, with the indexes a sorted or filtered list walks (list-sql.ts LS1). None is on `updated_at`, which every step writes: a step
 * stays a HOT update, and a list sorted by it reads the executions rows and sorts them. Existing
 * rows are filled from their logs, in SQL: the principal from sequence 0 (its payload, or the
 * identity a subject-sealed start keeps in the clear in its meta), what was spent as the fold
 * adds it, the deltas of RESOURCE_METERED and the resources of CHILD_DONE (each amount a number
 * >= 0, kernel/resources.ts Q2). Text that is no JSON (a sealed or corrupt payload) is read as
 * nothing, by a helper function dropped at the end. What a sealed payload holds, and what a
 * chain's successor was carried, is not read: such a row shows it from its next metered batch.
 */
export function listColumns(t: Tables): string {
  const json = t.executions.replace(/executions$/, "loom_migration_json");
  const amount = (path: string) =>
    `CASE WHEN jsonb_typeof(r #> '{${path}}') = 'number'
       AND (r #>> '{${path}}')::numeric BETWEEN 0 AND 1e300
      THEN (r #>> '{${path}}')::numeric::float8 END`;
  return `
  ALTER TABLE ${t.executions} ADD COLUMN principal TEXT COLLATE "C",
    ADD COLUMN cost_usd DOUBLE PRECISION, ADD COLUMN cost_unknown BOOLEAN,
    ADD COLUMN tokens DOUBLE PRECISION;
  CREATE FUNCTION ${json}(t text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $f$
  BEGIN
    RETURN t::jsonb;
  EXCEPTION WHEN others THEN
    RETURN NULL;
  END $f$;
  UPDATE ${t.executions} AS x SET principal = NULLIF(COALESCE(
      CASE WHEN jsonb_typeof(p -> 'principal') = 'string' THEN p ->> 'principal' END,
      CASE WHEN jsonb_typeof(m #> '{identity,principal}') = 'string'
        THEN m #>> '{identity,principal}' END), '')
    FROM (SELECT ev.x, ${json}(ev.payload) AS p, ${json}(ev.meta) AS m
          FROM ${t.events} ev WHERE ev.seq = 0) AS s
    WHERE s.x = x.n;
  UPDATE ${t.executions} AS x SET cost_usd = s.cost, cost_unknown = s.unknown, tokens = s.tokens
    FROM (
      SELECT a.x, SUM(a.cost) AS cost, bool_or(a.unknown) AS unknown,
        CASE WHEN COUNT(a.input) + COUNT(a.output) > 0
          THEN COALESCE(SUM(a.input), 0) + COALESCE(SUM(a.output), 0) END AS tokens
      FROM (
        SELECT x, ${amount("costUsd")} AS cost, ${amount("tokens,input")} AS input,
          ${amount("tokens,output")} AS output,
          CASE WHEN r -> 'costUnknown' = 'true'::jsonb THEN true END AS unknown
        FROM (
          SELECT ev.x, CASE ev.kind WHEN ${kindCode("RESOURCE_METERED")} THEN j -> 'delta'
            ELSE j #> '{outcome,resources}' END AS r
          FROM ${t.events} ev, LATERAL (SELECT ${json}(ev.payload) AS j) AS parsed
          WHERE ev.kind IN (${kindCode("RESOURCE_METERED")}, ${kindCode("CHILD_DONE")})
        ) AS found
        WHERE jsonb_typeof(r) = 'object'
      ) AS a
      GROUP BY a.x
    ) AS s
    WHERE s.x = x.n;
  DROP FUNCTION ${json}(text);
  CREATE INDEX executions_by_principal ON ${t.executions} (principal, id);
  CREATE INDEX executions_by_created ON ${t.executions} (created_at, id);
  CREATE INDEX executions_by_cost ON ${t.executions} ((coalesce(cost_usd, 0)), id);
  `;
}

/**
 * Migration 7, queues (issue 26, spi-queues.ts S26..S29, queues.ts Q1..Q5): an execution's place in
 * its queue, from its sequence 0 (the not-before time moved by later batches, S28; not indexed, so
 * a debounce's update stays HOT). `executions_queued` holds the queued executions of each queue in
 * admission order, `executions_by_queue` a queue's executions by status (admission counts the
 * active ones), and `executions_queue_dedupe` is S27's key among a queue's queued executions, a
 * safety net under the append routine's own check (append-routine.ts R13). Self-contained.
 */
export function queueColumns(t: Tables): string {
  return `
  ALTER TABLE ${t.executions} ADD COLUMN queue TEXT COLLATE "C",
    ADD COLUMN queue_key TEXT COLLATE "C", ADD COLUMN queue_priority DOUBLE PRECISION,
    ADD COLUMN queue_dedupe TEXT COLLATE "C", ADD COLUMN queue_not_before BIGINT;
  CREATE INDEX executions_queued ON ${t.executions} (queue, queue_priority, created_at, id)
    WHERE status = 'queued';
  CREATE INDEX executions_by_queue ON ${t.executions} (queue, status, queue_key)
    WHERE queue IS NOT NULL;
  CREATE UNIQUE INDEX executions_queue_dedupe ON ${t.executions} (queue, queue_dedupe)
    WHERE status = 'queued' AND queue_dedupe IS NOT NULL;
  `;
}

/**
 * Migration 8, rate limiters (issue 26, limiters.ts PL1..PL3): a limiter's row keeps its last window
 * (for its view) and its block; a grant is settled once `used_input` is set, and is found by its
 * window (`limiter_grants_by_time`) and, while it holds a slot, by its hold's end; a waiter's place
 * is (since_ms, n), n an identity: a row written later has a larger one (limiter-rules.ts LR5).
 */
export function limiters(t: Tables): string {
  return `
  CREATE TABLE ${t.limiters} (
    name TEXT COLLATE "C" PRIMARY KEY,
    window_ms BIGINT,
    blocked_until_ms BIGINT
  );
  CREATE TABLE ${t.limiterGrants} (
    limiter TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    execution_id TEXT COLLATE "C" NOT NULL,
    at_ms BIGINT NOT NULL,
    requests BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    used_input BIGINT,
    used_output BIGINT,
    hold_until_ms BIGINT NOT NULL,
    PRIMARY KEY (limiter, id)
  );
  CREATE INDEX limiter_grants_by_time ON ${t.limiterGrants} (limiter, at_ms);
  CREATE INDEX limiter_grants_held ON ${t.limiterGrants} (limiter, hold_until_ms)
    WHERE used_input IS NULL;
  CREATE TABLE ${t.limiterWaiters} (
    limiter TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    execution_id TEXT COLLATE "C" NOT NULL,
    since_ms BIGINT NOT NULL,
    wait_until_ms BIGINT NOT NULL,
    n BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (limiter, id)
  );
  CREATE INDEX limiter_waiters_by_place ON ${t.limiterWaiters} (limiter, since_ms, n);
  `;
}

export const MIGRATIONS: readonly ((t: Tables) => string)[] = [
  (t) => `
  CREATE TABLE ${t.executions} (
    id TEXT COLLATE "C" PRIMARY KEY,
    flow TEXT COLLATE "C" NOT NULL,
    status TEXT NOT NULL,
    head BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  ) WITH (fillfactor = 80);
  CREATE INDEX executions_by_status ON ${t.executions} (status, id);
  -- Claims (S17) walk the runnable executions in id order, a few at a time.
  CREATE INDEX executions_runnable ON ${t.executions} (id)
    WHERE status IN ('pending', 'running');
  CREATE TABLE ${t.events} (
    execution_id TEXT COLLATE "C" NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    at BIGINT NOT NULL,
    payload TEXT NOT NULL,
    meta TEXT,
    PRIMARY KEY (execution_id, seq)
  );
  CREATE TABLE ${t.leases} (
    execution_id TEXT COLLATE "C" PRIMARY KEY,
    owner TEXT COLLATE "C",
    fence BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  ) WITH (fillfactor = 80);
  CREATE TABLE ${t.timers} (
    execution_id TEXT COLLATE "C" NOT NULL,
    timer_id TEXT COLLATE "C" NOT NULL,
    wake_at BIGINT NOT NULL,
    PRIMARY KEY (execution_id, timer_id)
  );
  CREATE INDEX timers_by_wake ON ${t.timers} (wake_at, execution_id, timer_id);
  CREATE TABLE ${t.snapshots} (
    execution_id TEXT COLLATE "C" PRIMARY KEY,
    seq BIGINT NOT NULL,
    state TEXT NOT NULL
  );
  CREATE TABLE ${t.notices} (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner TEXT COLLATE "C" NOT NULL,
    execution_id TEXT COLLATE "C" NOT NULL,
    kind TEXT NOT NULL,
    at BIGINT NOT NULL
  );
  CREATE INDEX notices_by_owner ON ${t.notices} (owner, id);
  CREATE INDEX notices_by_time ON ${t.notices} (at);
  CREATE TABLE ${t.schedules} (
    name TEXT COLLATE "C" PRIMARY KEY,
    flow TEXT NOT NULL,
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL,
    input TEXT,
    from_ms BIGINT NOT NULL,
    cursor_ms BIGINT NOT NULL
  );
  CREATE TABLE ${t.inbox} (
    chain_id TEXT COLLATE "C" NOT NULL,
    seq BIGINT NOT NULL,
    topic TEXT COLLATE "C" NOT NULL,
    key TEXT NOT NULL,
    payload TEXT NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (chain_id, seq)
  );
  CREATE INDEX inbox_by_topic ON ${t.inbox} (chain_id, topic, seq);
  -- S12: the next sequence number of each chain's stream, a row an append locks.
  CREATE TABLE ${t.inboxHeads} (
    chain_id TEXT COLLATE "C" PRIMARY KEY,
    next_seq BIGINT NOT NULL
  );
  `,
  // S19 (keys.ts): never updated, so no row version but the live one holds a key's material.
  (t) => `
  CREATE TABLE ${t.keys} (
    id TEXT COLLATE "C" PRIMARY KEY,
    material TEXT NOT NULL
  );
  `,
  // Claims (leases.ts L4): whether a lease row's execution is runnable, kept on the row, and an
  // index of the runnable ones by when their lease is free (a released one at -1). Added false
  // (no table rewrite), the runnable ones back-filled, then defaulting to true: a row inserted by
  // an earlier release's routine, which knows nothing of the column, is then still found (L4).
  (t) => `
  ALTER TABLE ${t.leases} ADD COLUMN runnable BOOLEAN NOT NULL DEFAULT false;
  UPDATE ${t.leases} l SET runnable = true FROM ${t.executions} e
    WHERE e.id = l.execution_id AND e.status IN (${RUNNABLE_SQL});
  ALTER TABLE ${t.leases} ALTER COLUMN runnable SET DEFAULT true;
  CREATE INDEX leases_claimable ON ${t.leases} (${freeAtSql()}, execution_id) WHERE runnable;
  `,
  leanEventRows,
  forksMembersPauses,
  listColumns,
  queueColumns,
  limiters,
];

/** Brings `schema` to the latest version (M1..M3); returns the versions it applied. */
export async function migrate(client: pg.ClientBase, schema: string): Promise<number[]> {
  const t = tables(schema);
  const applied: number[] = [];
  await client.query("BEGIN");
  try {
    // Qualified: `hashtextextended($1, 0)` would take an overload `(text, integer)` from a
    // schema on the session's search_path over pg_catalog's `(text, bigint)` (R7's reason).
    await client.query(
      "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0))",
      [`loom.migrate:${schema}`],
    );
    // Looked up first: a role that may use an existing schema need not be allowed to create one.
    const found = await client.query<{
      schema: string | null;
      table: string | null;
      routine: string | null;
    }>(
      `SELECT to_regnamespace($1)::text AS schema, to_regclass($2)::text AS table,
         to_regprocedure($3)::text AS routine`,
      [`"${schema}"`, t.migrations, `"${schema}".${APPEND_ROUTINE}${APPEND_ROUTINE_ARGS}`],
    );
    if (!found.rows[0]?.schema) await client.query(`CREATE SCHEMA "${schema}"`);
    if (!found.rows[0]?.table) {
      await client.query(`CREATE TABLE ${t.migrations} (
        version INTEGER PRIMARY KEY,
        applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
      )`);
    }
    const { rows } = await client.query<{ version: number }>(
      `SELECT COALESCE(MAX(version), 0)::int AS version FROM ${t.migrations}`,
    );
    const current = rows[0]?.version ?? 0;
    for (let version = current + 1; version <= MIGRATIONS.length; version++) {
      const sql = MIGRATIONS[version - 1];
      if (sql === undefined) break;
      await client.query(sql(t));
      await client.query(`INSERT INTO ${t.migrations} (version) VALUES ($1)`, [version]);
      applied.push(version);
    }
    // M3
    if (!found.rows[0]?.routine) {
      await client.query(appendRoutineSql(t, schema, wakeChannel(schema)));
    }
    await client.query("COMMIT");
    return applied;
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  }
}
