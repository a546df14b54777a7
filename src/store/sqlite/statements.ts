/**
 * The SQLite store's prepared statements, declared in one place and grouped by the SPI's groups:
 * the parts of the store (append.ts, reads.ts, leases.ts, ...) share them, since an append writes
 * what the other parts read and change (a batch's lease, snapshot, notice and timer rows, S9).
 *
 * Q1. An execution's head is the higher of its last sequence numbers in `events` and in the
 *     append-ordered `events_hot` (hot-events.ts H1): every head read is `headOf` (`headOfKey`
 *     where the key is at hand).
 * Q2. Each statement is prepared once per store, when it opens: an append runs prepared
 *     statements only.
 */
import type Database from "better-sqlite3";
import type { ExecutionStatus } from "../../kernel/events.ts";
import { NOT_A_WAKE_ROW, type ScheduleRow } from "../rows.ts";
import type { StoredEventRow } from "./row-codec.ts";

type Db = Database.Database;

export interface LeaseRow {
  owner: string | null;
  fence: number;
  expires_at: number;
}

/** SQL: the integer key (row-codec.ts C1) of the execution `id` names (a parameter or a column). */
export function keyOf(id: string): string {
  return `(SELECT n FROM executions WHERE id = ${id})`;
}

/** Q1: SQL for the head of the execution whose integer key `x` names (a parameter or a column). */
export function headOfKey(x: string): string {
  return `(SELECT MAX(m) FROM (SELECT MAX(seq) AS m FROM events WHERE x = ${x} UNION ALL SELECT MAX(seq) FROM events_hot WHERE x = ${x}))`;
}

/** Q1: SQL for the head of the execution `id` names (a parameter or a column). */
export function headOf(id: string): string {
  return headOfKey(keyOf(id));
}

/** What an append checks about an execution, with its integer key (row-codec.ts C1). */
export interface CheckRow {
  x: number | null;
  head: number | null;
  status: ExecutionStatus | null;
  fence: number | null;
}

/** A prepared statement: `P` its parameters (an array, or one object of named ones), `R` a row. */
type Stmt<P extends unknown[] | object = unknown[], R = unknown> = Database.Statement<P, R>;

/** Q2: the statements every part of the store shares, by group (the prepare functions below). */
export interface Statements {
  // Events and executions (S1..S3, S5).
  head: Stmt<{ id: string }, { head: number | null }>;
  check: Stmt<{ id: string }, CheckRow>;
  reserveKeys: Stmt<[number], number>;
  insertExecution: Stmt;
  setStatus: Stmt;
  setSpent: Stmt;
  queueHolder: Stmt<[string, string], string>;
  setNotBefore: Stmt;
  insertEvent: Stmt;
  hotCount: Stmt<[], { n: number }>;
  settle: Stmt;
  clearHot: Stmt;
  read: Stmt<{ id: string; from: number; limit: number }, StoredEventRow>;
  // A fork's row under its origin (S21).
  insertFork: Stmt;
  // Snapshots (S8).
  saveSnapshot: Stmt;
  loadSnapshot: Stmt<[string], { seq: number; state: string | Buffer }>;
  // Leases (S3, S6, S9).
  claimLease: Stmt;
  getLease: Stmt<[string], LeaseRow>;
  putLease: Stmt;
  renewLease: Stmt;
  releaseLease: Stmt;
  // Timer rows (S7, S15, S16).
  setTimer: Stmt;
  clearTimer: Stmt;
  deferTimer: Stmt;
  clearTimers: Stmt;
  due: Stmt<[number, number], { execution_id: string; timer_id: string; wake_at: number }>;
  nextWake: Stmt<[], { w: number | null }>;
  // Notices (S10).
  postNotice: Stmt;
  pruneNotices: Stmt;
  notices: Stmt<[string], { id: number; execution_id: string; kind: string; at: number }>;
  forgetNotices: Stmt;
  // Schedules (S11).
  putSchedule: Stmt;
  schedules: Stmt<[], ScheduleRow>;
  advanceSchedule: Stmt;
  deleteSchedule: Stmt;
  setSchedulePaused: Stmt;
}

/** Q2: every statement of the store but those of its inbox, keys and retention (their modules'). */
export function prepareStatements(db: Db): Statements {
  return {
    ...eventStatements(db),
    ...snapshotStatements(db),
    ...leaseStatements(db),
    ...timerStatements(db),
    ...noticeStatements(db),
    ...scheduleStatements(db),
  };
}

/** Appends (S1..S3) and reads of events and executions. */
function eventStatements(db: Db) {
  return {
    head: db.prepare<{ id: string }, { head: number | null }>(`SELECT ${headOf("@id")} AS head`),
    /** Everything an append checks, in one statement. */
    check: db.prepare<{ id: string }, CheckRow>(
      // An id without an executions row has no key, so no events: its head is not looked for.
      `SELECT e.n AS x, CASE WHEN e.n IS NULL THEN NULL ELSE ${headOfKey("e.n")} END AS head,
              e.status AS status, (SELECT fence FROM leases WHERE execution_id = @id) AS fence
         FROM (SELECT 1) LEFT JOIN executions e ON e.id = @id`,
    ),
    /** The last of `?` new integer keys (row-codec.ts C1; append.ts A4), in an append's transaction. */
    reserveKeys: db
      .prepare<[number], number>(
        "UPDATE counters SET value = value + ? WHERE name = 'execution' RETURNING value",
      )
      .pluck(),
    insertExecution: db.prepare(
      `INSERT INTO executions (id, flow, status, created_at, n, principal, cost_usd, cost_unknown, tokens,
         queue, queue_key, queue_priority, queue_dedupe, queue_not_before)
       VALUES (@id, @flow, @status, @at0, @x, @principal, @cost, @unknown, @tokens,
         @queue, @queueKey, @priority, @dedupe, @notBefore)`,
    ),
    /** S27: the queued execution that holds a dedupe key of a queue. */
    queueHolder: db
      .prepare<[string, string], string>(
        "SELECT id FROM executions WHERE queue = ? AND queue_dedupe = ? AND status = 'queued' LIMIT 1",
      )
      .pluck(),
    /** S28 */
    setNotBefore: db.prepare(
      "UPDATE executions SET queue_not_before = ? WHERE id = ? AND queue IS NOT NULL",
    ),
    setStatus: db.prepare("UPDATE executions SET status = @status WHERE id = @id"),
    /** S24: only a batch that carries `spent` runs it. */
    setSpent: db.prepare(
      "UPDATE executions SET cost_usd = @cost, cost_unknown = @unknown, tokens = @tokens WHERE id = @id",
    ),
    insertEvent: db.prepare(
      "INSERT INTO events_hot (x, seq, kind, at, payload, meta) VALUES (?, ?, ?, ?, ?, ?)",
    ),
    hotCount: db.prepare<[], { n: number }>("SELECT COUNT(*) AS n FROM events_hot"),
    settle: db.prepare(
      `INSERT INTO events (x, seq, kind, at, payload, meta)
       SELECT x, seq, kind, at, payload, meta FROM events_hot ORDER BY x, seq`,
    ),
    clearHot: db.prepare("DELETE FROM events_hot"),
    insertFork: db.prepare("INSERT INTO forks (origin_id, fork_id, seq) VALUES (?, ?, ?)"),
    read: db.prepare<{ id: string; from: number; limit: number }, StoredEventRow>(
      `SELECT seq, kind, at, payload, meta FROM events WHERE x = ${keyOf("@id")} AND seq >= @from
       UNION ALL
       SELECT seq, kind, at, payload, meta FROM events_hot
        WHERE x = ${keyOf("@id")} AND seq >= @from
       ORDER BY seq LIMIT @limit`,
    ),
  };
}

/** S8: a snapshot never replaces a newer one. */
function snapshotStatements(db: Db) {
  return {
    saveSnapshot: db.prepare(
      `INSERT INTO snapshots (execution_id, seq, state) VALUES (?, ?, ?)
       ON CONFLICT (execution_id) DO UPDATE SET seq = excluded.seq, state = excluded.state
       WHERE excluded.seq >= snapshots.seq`,
    ),
    loadSnapshot: db.prepare<[string], { seq: number; state: string | Buffer }>(
      "SELECT seq, state FROM snapshots WHERE execution_id = ?",
    ),
  };
}

/** S3, S6, S9. */
function leaseStatements(db: Db) {
  return {
    claimLease: db.prepare(
      "INSERT INTO leases (execution_id, owner, fence, expires_at) VALUES (?, ?, ?, ?)",
    ),
    getLease: db.prepare<[string], LeaseRow>(
      "SELECT owner, fence, expires_at FROM leases WHERE execution_id = ?",
    ),
    putLease: db.prepare(
      `INSERT INTO leases (execution_id, owner, fence, expires_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (execution_id) DO UPDATE SET owner = excluded.owner, fence = excluded.fence,
         expires_at = excluded.expires_at`,
    ),
    renewLease: db.prepare(
      "UPDATE leases SET expires_at = ? WHERE execution_id = ? AND owner = ? AND fence = ?",
    ),
    releaseLease: db.prepare(
      "UPDATE leases SET owner = NULL WHERE execution_id = ? AND owner = ? AND fence = ?",
    ),
  };
}

/** S7, S15, S16. */
function timerStatements(db: Db) {
  return {
    setTimer: db.prepare(
      "INSERT OR REPLACE INTO timers (execution_id, timer_id, wake_at) VALUES (?, ?, ?)",
    ),
    clearTimer: db.prepare("DELETE FROM timers WHERE execution_id = ? AND timer_id = ?"),
    deferTimer: db.prepare("UPDATE timers SET wake_at = ? WHERE execution_id = ? AND timer_id = ?"),
    // An execution's end clears its own waits' rows, never the wake rows others wrote for it
    // (S15: `child:`, `cascade:` and `watch:` ids, fold/index-changes.ts isWakeId).
    clearTimers: db.prepare(`DELETE FROM timers WHERE execution_id = ? AND ${NOT_A_WAKE_ROW}`),
    due: db.prepare<[number, number], { execution_id: string; timer_id: string; wake_at: number }>(
      "SELECT execution_id, timer_id, wake_at FROM timers WHERE wake_at <= ? ORDER BY wake_at LIMIT ?",
    ),
    nextWake: db.prepare<[], { w: number | null }>("SELECT MIN(wake_at) AS w FROM timers"),
  };
}

/** S10. */
function noticeStatements(db: Db) {
  return {
    postNotice: db.prepare(
      "INSERT INTO notices (owner, execution_id, kind, at) VALUES (?, ?, ?, ?)",
    ),
    // A notice to an owner that never takes it (it died) is dropped after a day.
    pruneNotices: db.prepare("DELETE FROM notices WHERE at < ?"),
    notices: db.prepare<[string], { id: number; execution_id: string; kind: string; at: number }>(
      "SELECT id, execution_id, kind, at FROM notices WHERE owner = ? ORDER BY id",
    ),
    forgetNotices: db.prepare("DELETE FROM notices WHERE owner = ? AND id <= ?"),
  };
}

/** S11, S23: a redefinition keeps fromMs, the cursor and the pause; a cursor never moves back. */
function scheduleStatements(db: Db) {
  return {
    putSchedule: db.prepare(
      `INSERT INTO schedules (name, flow, cron, timezone, input, from_ms, cursor_ms)
       VALUES (@name, @flow, @cron, @timezone, @input, @fromMs, @fromMs)
       ON CONFLICT (name) DO UPDATE SET flow = excluded.flow, cron = excluded.cron,
         timezone = excluded.timezone, input = excluded.input`,
    ),
    schedules: db.prepare<[], ScheduleRow>(
      "SELECT name, flow, cron, timezone, input, from_ms, cursor_ms, paused FROM schedules ORDER BY name",
    ),
    advanceSchedule: db.prepare(
      "UPDATE schedules SET cursor_ms = ? WHERE name = ? AND cursor_ms < ?",
    ),
    deleteSchedule: db.prepare("DELETE FROM schedules WHERE name = ?"),
    setSchedulePaused: db.prepare(
      `UPDATE schedules SET paused = @paused, cursor_ms = MAX(cursor_ms, @cursorMs)
        WHERE name = @name`,
    ),
  };
}
