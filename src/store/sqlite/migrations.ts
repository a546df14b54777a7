import { kindCode } from "../kind-codes.ts";
import { kindCodeSql } from "./row-codec.ts";

/** Migration 6 keeps an execution's events under its integer key (row-codec.ts C1..C3). */
const EVENT_COLUMNS = `
    x INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    kind NOT NULL,
    at INTEGER NOT NULL,
    payload TEXT NOT NULL,
    meta`;

/** Migration 6's conversion of an old row's columns (the 22 kinds codes existed for then). */
const CONVERTED = `e.n, ev.seq, ${kindCodeSql("ev.kind", 22)}, ev.at, ev.payload,
    CASE WHEN json_valid(ev.meta) AND json_type(ev.meta, '$.fence') = 'integer'
           AND (SELECT COUNT(*) FROM json_each(ev.meta)) = 1
         THEN json_extract(ev.meta, '$.fence') ELSE ev.meta END`;

/**
 * The SQLite schema as an ordered list of migrations. The position in the list is the version
 * (kept in `PRAGMA user_version`); a migration is never edited once released, only appended.
 *
 * An execution's head and last update are read from its events (the primary key makes both a
 * B-tree seek), so an append that does not change the status writes the events table alone: a
 * durable step dirties one page, not three.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE events (
    execution_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    at INTEGER NOT NULL,
    payload TEXT NOT NULL,
    meta TEXT,
    PRIMARY KEY (execution_id, seq)
  ) WITHOUT ROWID;
  CREATE TABLE executions (
    id TEXT PRIMARY KEY,
    flow TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX executions_by_status ON executions (status, id);
  CREATE TABLE leases (
    execution_id TEXT PRIMARY KEY,
    owner TEXT,
    fence INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE timers (
    execution_id TEXT NOT NULL,
    timer_id TEXT NOT NULL,
    wake_at INTEGER NOT NULL,
    PRIMARY KEY (execution_id, timer_id)
  ) WITHOUT ROWID;
  CREATE INDEX timers_by_wake ON timers (wake_at);
  CREATE TABLE snapshots (
    execution_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL
  ) WITHOUT ROWID;
  `,
  `
  CREATE TABLE events_hot (
    execution_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    at INTEGER NOT NULL,
    payload TEXT NOT NULL,
    meta TEXT
  );
  CREATE UNIQUE INDEX events_hot_by_execution ON events_hot (execution_id, seq);
  `,
  `
  CREATE TABLE notices (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE INDEX notices_by_owner ON notices (owner, id);
  CREATE INDEX notices_by_time ON notices (at);
  CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    flow TEXT NOT NULL,
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL,
    input TEXT,
    from_ms INTEGER NOT NULL,
    cursor_ms INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
  `
  CREATE TABLE inbox (
    chain_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    topic TEXT NOT NULL,
    key TEXT NOT NULL,
    payload TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (chain_id, seq)
  ) WITHOUT ROWID;
  CREATE INDEX inbox_by_topic ON inbox (chain_id, topic, seq);
  `,
  // Key material (S19, keys.ts): no rowid, so a row's bytes live in one b-tree, the one
  // secure_delete scrubs.
  `
  CREATE TABLE keys (id TEXT PRIMARY KEY, material TEXT NOT NULL) WITHOUT ROWID;
  `,
  // Leaner rows (issue 23 item 3, row-codec.ts C1..C3): an execution's events are keyed by an
  // integer given once, on its executions row (`n`, from the `counters` row), instead of its id
  // on every row; the kind is a code and a `{ fence }` meta the integer. Both event tables are
  // rebuilt with the old rows converted, the hot ones settled on the way.
  `
  ALTER TABLE executions ADD COLUMN n INTEGER;
  UPDATE executions SET n = r.n
    FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS n FROM executions) AS r
   WHERE r.id = executions.id;
  CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
  INSERT INTO counters (name, value) SELECT 'execution', COALESCE(MAX(n), 0) FROM executions;
  CREATE TABLE events_v6 (${EVENT_COLUMNS},
    PRIMARY KEY (x, seq)
  ) WITHOUT ROWID;
  INSERT INTO events_v6 SELECT ${CONVERTED}
    FROM events ev JOIN executions e ON e.id = ev.execution_id;
  INSERT INTO events_v6 SELECT ${CONVERTED}
    FROM events_hot ev JOIN executions e ON e.id = ev.execution_id;
  DROP TABLE events;
  DROP TABLE events_hot;
  ALTER TABLE events_v6 RENAME TO events;
  CREATE TABLE events_hot (${EVENT_COLUMNS});
  CREATE UNIQUE INDEX events_hot_by_execution ON events_hot (x, seq);
  `,
  // Issue 25: forks by origin (S21: `id` is the order they were recorded in), the fleet's
  // members (S22) with the leases each holds found by owner, and a schedule's pause (S23).
  `
  CREATE TABLE forks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    origin_id TEXT NOT NULL,
    fork_id TEXT NOT NULL,
    seq INTEGER NOT NULL
  );
  CREATE INDEX forks_by_origin ON forks (origin_id, id);
  CREATE INDEX forks_by_fork ON forks (fork_id);
  CREATE TABLE members (
    owner TEXT PRIMARY KEY,
    flows TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    host TEXT,
    pid INTEGER
  ) WITHOUT ROWID;
  CREATE INDEX leases_by_owner ON leases (owner, execution_id) WHERE owner IS NOT NULL;
  ALTER TABLE schedules ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
  `,
  listColumns(),
  // Queues (issue 26, spi-queues.ts S26..S29): an execution's place in its queue, from its
  // sequence 0 (the not-before time moved by later batches, S28). Admission and the view walk the
  // queued ones of a queue in admission order, and count its active ones by status, so neither
  // reads the executions of other queues or the ended ones of this one. The unique index is S27's
  // dedupe, among the queued executions of a queue only.
  `
  ALTER TABLE executions ADD COLUMN queue TEXT;
  ALTER TABLE executions ADD COLUMN queue_key TEXT;
  ALTER TABLE executions ADD COLUMN queue_priority REAL;
  ALTER TABLE executions ADD COLUMN queue_dedupe TEXT;
  ALTER TABLE executions ADD COLUMN queue_not_before INTEGER;
  CREATE INDEX executions_queued ON executions (queue, queue_priority, created_at, id)
    WHERE status = 'queued';
  CREATE INDEX executions_by_queue ON executions (queue, status, queue_key)
    WHERE queue IS NOT NULL;
  CREATE UNIQUE INDEX executions_queue_dedupe ON executions (queue, queue_dedupe)
    WHERE status = 'queued' AND queue_dedupe IS NOT NULL;
  `,
  // Issue 26: rate limiters (limiters.ts, S30..S34). A limiter's row keeps its last window (for
  // its view) and its block; a grant is settled once `used_input` is set; a waiter's place is
  // (since_ms, n), n its rowid: a row written later gets a larger one (limiter-rules.ts LR5).
  `
  CREATE TABLE limiters (
    name TEXT PRIMARY KEY,
    window_ms INTEGER,
    blocked_until_ms INTEGER
  ) WITHOUT ROWID;
  CREATE TABLE limiter_grants (
    limiter TEXT NOT NULL,
    id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    used_input INTEGER,
    used_output INTEGER,
    hold_until_ms INTEGER NOT NULL,
    PRIMARY KEY (limiter, id)
  ) WITHOUT ROWID;
  CREATE INDEX limiter_grants_by_time ON limiter_grants (limiter, at_ms);
  CREATE INDEX limiter_grants_held ON limiter_grants (limiter, hold_until_ms)
    WHERE used_input IS NULL;
  CREATE TABLE limiter_waiters (
    n INTEGER PRIMARY KEY,
    limiter TEXT NOT NULL,
    id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    since_ms INTEGER NOT NULL,
    wait_until_ms INTEGER NOT NULL,
    UNIQUE (limiter, id)
  );
  CREATE INDEX limiter_waiters_by_place ON limiter_waiters (limiter, since_ms, n);
  `,
];

/**
 * The list's columns (spi.ts S24, issue 25 item 4): who started each execution and what it has
 * spent, with the indexes a sorted or filtered list of many executions walks (list-sql.ts LS1).
 * Existing rows are filled from their logs: the principal from sequence 0 (its payload, or the
 * identity a subject-sealed start keeps in the clear in its meta); what was spent as the fold
 * adds it, the deltas of RESOURCE_METERED and the resources of CHILD_DONE (each amount a number
 * >= 0, as kernel/resources.ts Q2 reads them). What a sealed payload holds, and what a chain's
 * successor was carried, is not read here: such a row shows it from its next metered batch on,
 * which carries the whole total.
 */
export function listColumns(): string {
  const events = `(SELECT x, seq, kind, payload, meta FROM events
    UNION ALL SELECT x, seq, kind, payload, meta FROM events_hot)`;
  // Nested CASEs: SQLite does not promise to evaluate AND's terms in order, and json_extract
  // of text that is no JSON is an error, not NULL.
  const text = (cell: string, path: string) =>
    `CASE WHEN json_valid(${cell}) THEN CASE WHEN json_type(${cell}, '${path}') = 'text'
      THEN json_extract(${cell}, '${path}') END END`;
  const amount = (r: string, path: string) =>
    `CASE WHEN json_type(${r}, '${path}') IN ('integer', 'real') AND json_extract(${r}, '${path}') >= 0
      THEN json_extract(${r}, '${path}') END`;
  return `
  ALTER TABLE executions ADD COLUMN principal TEXT;
  ALTER TABLE executions ADD COLUMN cost_usd REAL;
  ALTER TABLE executions ADD COLUMN cost_unknown INTEGER;
  ALTER TABLE executions ADD COLUMN tokens INTEGER;
  UPDATE executions SET principal = (
    SELECT NULLIF(COALESCE(${text("ev.payload", "$.principal")},
      ${text("ev.meta", "$.identity.principal")}), '')
    FROM ${events} ev WHERE ev.x = executions.n AND ev.seq = 0);
  WITH r AS (
    SELECT ev.x, CASE WHEN NOT json_valid(ev.payload) THEN NULL
      WHEN ev.kind = ${kindCode("RESOURCE_METERED")} THEN json_extract(ev.payload, '$.delta')
      ELSE json_extract(ev.payload, '$.outcome.resources') END AS r
    FROM ${events} ev
    WHERE ev.kind IN (${kindCode("RESOURCE_METERED")}, ${kindCode("CHILD_DONE")})
  ), a AS (
    SELECT x, ${amount("r", "$.costUsd")} AS cost,
      ${amount("r", "$.tokens.input")} AS input, ${amount("r", "$.tokens.output")} AS output,
      CASE WHEN json_type(r, '$.costUnknown') = 'true' THEN 1 END AS unknown
    FROM r WHERE CASE WHEN r IS NULL OR NOT json_valid(r) THEN 0 ELSE json_type(r) = 'object' END
  ), s AS (
    SELECT x, SUM(cost) AS cost, MAX(unknown) AS unknown,
      CASE WHEN COUNT(input) + COUNT(output) > 0
        THEN COALESCE(SUM(input), 0) + COALESCE(SUM(output), 0) END AS tokens
    FROM a GROUP BY x
  )
  UPDATE executions SET cost_usd = s.cost, cost_unknown = s.unknown, tokens = s.tokens
    FROM s WHERE s.x = executions.n;
  CREATE INDEX executions_by_principal ON executions (principal, id);
  CREATE INDEX executions_by_created ON executions (created_at, id);
  CREATE INDEX executions_by_cost ON executions (coalesce(cost_usd, 0), id);
  `;
}
