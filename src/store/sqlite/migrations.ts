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
];
