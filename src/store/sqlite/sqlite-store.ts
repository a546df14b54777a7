/**
 * The embedded store: every SPI on one SQLite file through better-sqlite3, in WAL mode.
 *
 * Several processes may open the same file. Every write runs in a `BEGIN IMMEDIATE`
 * transaction, so writers are serialised by SQLite's lock (waiting up to `busyTimeoutMs`), and
 * the fence and sequence checks run inside the transaction that appends (S2, S3).
 * `synchronous` defaults to FULL: a committed append survives a power loss, not only a crash of
 * the process. NORMAL survives `kill -9` and is faster; choose it knowingly.
 */
import type Database from "better-sqlite3";
import { requirePeer } from "../../peers.ts";
import type { Envelope, EnvelopeMeta, ExecutionStatus } from "../../kernel/events.ts";
import { LoomError, ensureError } from "../../kernel/errors.ts";
import { jsonText } from "../../kernel/json.ts";
import type { Snapshot } from "../../fold/state.ts";
import { checkBatch, effectiveFence, leaseAvailable } from "../append-check.ts";
import type {
  AppendBatch,
  AppendOutcome,
  DueTimer,
  Lease,
  ListQuery,
  NoticeKind,
  Store,
  StoreHooks,
} from "../spi.ts";
import { sqliteInbox } from "./inbox.ts";
import { sqliteKeys } from "./keys.ts";
import { sqliteRetention } from "./retention.ts";
import { MIGRATIONS } from "./migrations.ts";
import {
  envelopeOf,
  NOT_A_WAKE_ROW,
  scheduleOf,
  summaryOf,
  type EventRow,
  type ExecutionRow,
  type ScheduleRow,
} from "../rows.ts";

export interface SqliteStoreOptions {
  synchronous?: "FULL" | "NORMAL";
  busyTimeoutMs?: number;
  hooks?: StoreHooks;
}

interface LeaseRow {
  owner: string | null;
  fence: number;
  expires_at: number;
}

const SETTLE_AT_ROWS = 4000;
const NOTICE_TTL_MS = 24 * 60 * 60 * 1000;

/** The meta of nearly every envelope is `{ fence }` or `{ kernel, fence }`: no serialiser needed. */
function metaText(meta: EnvelopeMeta): string {
  const keys = Object.keys(meta);
  if (keys.length === 1 && keys[0] === "fence" && Number.isSafeInteger(meta.fence)) {
    return `{"fence":${meta.fence}}`;
  }
  return JSON.stringify(meta);
}

function headOf(id: string): string {
  return `(SELECT MAX(m) FROM (SELECT MAX(seq) AS m FROM events WHERE execution_id = ${id} UNION ALL SELECT MAX(seq) FROM events_hot WHERE execution_id = ${id}))`;
}

export function sqliteStore(path: string, options: SqliteStoreOptions = {}): Store {
  const db = new (requirePeer<typeof Database>("better-sqlite3", "loomwork/sqlite"))(path);
  db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 10_000}`);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${options.synchronous ?? "FULL"}`);
  migrate(db);
  const hooks = options.hooks ?? {};

  const q = {
    head: db.prepare<{ id: string }, { head: number | null }>(`SELECT ${headOf("@id")} AS head`),
    /** Everything an append checks, in one statement. */
    check: db.prepare<
      { id: string },
      { head: number | null; status: ExecutionStatus | null; fence: number | null }
    >(
      `SELECT ${headOf("@id")} AS head,
              (SELECT status FROM executions WHERE id = @id) AS status,
              (SELECT fence FROM leases WHERE execution_id = @id) AS fence`,
    ),
    insertExecution: db.prepare(
      "INSERT INTO executions (id, flow, status, created_at) VALUES (@id, @flow, @status, @at0)",
    ),
    setStatus: db.prepare("UPDATE executions SET status = @status WHERE id = @id"),
    fence: db.prepare<[string], { fence: number }>(
      "SELECT fence FROM leases WHERE execution_id = ?",
    ),
    insertEvent: db.prepare(
      "INSERT INTO events_hot (execution_id, seq, kind, at, payload, meta) VALUES (?, ?, ?, ?, ?, ?)",
    ),
    hotCount: db.prepare<[], { n: number }>("SELECT COUNT(*) AS n FROM events_hot"),
    settle: db.prepare(
      `INSERT INTO events (execution_id, seq, kind, at, payload, meta)
       SELECT execution_id, seq, kind, at, payload, meta FROM events_hot ORDER BY execution_id, seq`,
    ),
    clearHot: db.prepare("DELETE FROM events_hot"),
    setTimer: db.prepare(
      "INSERT OR REPLACE INTO timers (execution_id, timer_id, wake_at) VALUES (?, ?, ?)",
    ),
    clearTimer: db.prepare("DELETE FROM timers WHERE execution_id = ? AND timer_id = ?"),
    deferTimer: db.prepare("UPDATE timers SET wake_at = ? WHERE execution_id = ? AND timer_id = ?"),
    // An execution's end clears its own waits' rows, never the wake rows others wrote for it
    // (S15: `child:`, `cascade:` and `watch:` ids, fold/index-changes.ts isWakeId).
    clearTimers: db.prepare(`DELETE FROM timers WHERE execution_id = ? AND ${NOT_A_WAKE_ROW}`),
    read: db.prepare<{ id: string; from: number; limit: number }, EventRow>(
      `SELECT seq, kind, at, payload, meta FROM events WHERE execution_id = @id AND seq >= @from
       UNION ALL
       SELECT seq, kind, at, payload, meta FROM events_hot WHERE execution_id = @id AND seq >= @from
       ORDER BY seq LIMIT @limit`,
    ),
    claimLease: db.prepare(
      "INSERT INTO leases (execution_id, owner, fence, expires_at) VALUES (?, ?, ?, ?)",
    ),
    saveSnapshot: db.prepare(
      `INSERT INTO snapshots (execution_id, seq, state) VALUES (?, ?, ?)
       ON CONFLICT (execution_id) DO UPDATE SET seq = excluded.seq, state = excluded.state
       WHERE excluded.seq >= snapshots.seq`,
    ),
    loadSnapshot: db.prepare<[string], { seq: number; state: string }>(
      "SELECT seq, state FROM snapshots WHERE execution_id = ?",
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
    due: db.prepare<[number, number], { execution_id: string; timer_id: string; wake_at: number }>(
      "SELECT execution_id, timer_id, wake_at FROM timers WHERE wake_at <= ? ORDER BY wake_at LIMIT ?",
    ),
    nextWake: db.prepare<[], { w: number | null }>("SELECT MIN(wake_at) AS w FROM timers"),
    postNotice: db.prepare(
      "INSERT INTO notices (owner, execution_id, kind, at) VALUES (?, ?, ?, ?)",
    ),
    // A notice to an owner that never takes it (it died) is dropped after a day.
    pruneNotices: db.prepare("DELETE FROM notices WHERE at < ?"),
    notices: db.prepare<[string], { id: number; execution_id: string; kind: string; at: number }>(
      "SELECT id, execution_id, kind, at FROM notices WHERE owner = ? ORDER BY id",
    ),
    forgetNotices: db.prepare("DELETE FROM notices WHERE owner = ? AND id <= ?"),
    putSchedule: db.prepare(
      `INSERT INTO schedules (name, flow, cron, timezone, input, from_ms, cursor_ms)
       VALUES (@name, @flow, @cron, @timezone, @input, @fromMs, @fromMs)
       ON CONFLICT (name) DO UPDATE SET flow = excluded.flow, cron = excluded.cron,
         timezone = excluded.timezone, input = excluded.input`,
    ),
    schedules: db.prepare<[], ScheduleRow>(
      "SELECT name, flow, cron, timezone, input, from_ms, cursor_ms FROM schedules ORDER BY name",
    ),
    advanceSchedule: db.prepare(
      "UPDATE schedules SET cursor_ms = ? WHERE name = ? AND cursor_ms < ?",
    ),
    deleteSchedule: db.prepare("DELETE FROM schedules WHERE name = ?"),
  };

  /** Checks first, then writes: a refused batch has written nothing, so no savepoint is needed. */
  /**
   * What an append checks (head, status, fence) for the executions this connection appended to
   * since the last commit by any other connection (`PRAGMA data_version` tells): a group commit
   * of many executions then runs no check query. Cleared on a rollback and on anything another
   * process committed.
   */
  const known = new Map<string, { head: number; status?: ExecutionStatus; fence?: number }>();
  const dataVersion = db.prepare<[], number>("PRAGMA data_version").pluck();
  let seenVersion = -1;

  function checked(id: string): { head: number; status?: ExecutionStatus; fence?: number } {
    const cached = known.get(id);
    if (cached) return cached;
    const row = q.check.get({ id });
    const fresh: { head: number; status?: ExecutionStatus; fence?: number } = {
      head: row?.head ?? -1,
    };
    if (row?.status) fresh.status = row.status;
    if (row?.fence !== null && row?.fence !== undefined) fresh.fence = row.fence;
    return fresh;
  }

  function applyBatch(b: AppendBatch): void {
    const id = b.executionId;
    const row = checked(id);
    const leaseFence = row.fence;
    checkBatch(b, row.head, effectiveFence(b, leaseFence), row.status);
    if (leaseFence === undefined && b.claimLease) {
      q.claimLease.run(id, b.claimLease.owner, b.fence, b.claimLease.expiresAtMs);
    }
    for (const e of b.events) {
      q.insertEvent.run(
        id,
        e.seq,
        e.kind,
        e.at,
        jsonText(e.payload),
        e.meta === undefined ? null : metaText(e.meta),
      );
    }
    const first = b.events[0] as Envelope;
    const last = b.events[b.events.length - 1] as Envelope;
    if (known.size > 10_000) known.clear();
    known.set(id, { head: last.seq, status: b.status, fence: b.fence });
    if (row.status === undefined) {
      q.insertExecution.run({ id, flow: b.flow ?? "", status: b.status, at0: first.at });
    } else if (row.status !== b.status) {
      q.setStatus.run({ id, status: b.status });
    }
    if (b.releaseLease !== undefined) q.releaseLease.run(id, b.releaseLease, b.fence);
    if (b.snapshot) q.saveSnapshot.run(id, b.snapshot.seq, b.snapshot.stateJson);
    if (b.notice) {
      q.pruneNotices.run(last.at - NOTICE_TTL_MS);
      q.postNotice.run(b.notice.owner, id, b.notice.kind, last.at);
    }
    const ix = b.index;
    if (!ix) return;
    // S15: other executions' wake rows, in this batch's transaction.
    for (const w of ix.wakes ?? []) q.setTimer.run(w.executionId, w.timerId, w.wakeAtMs);
    if (ix.clearAllTimers) {
      q.clearTimers.run(id);
      return;
    }
    for (const t of ix.timersCleared) q.clearTimer.run(id, t);
    for (const t of ix.timersSet) q.setTimer.run(id, t.timerId, t.wakeAtMs);
  }

  const appendTx = db.transaction((batches: readonly AppendBatch[]): AppendOutcome[] => {
    const version = dataVersion.get() ?? -1;
    if (version !== seenVersion) {
      known.clear();
      seenVersion = version;
    }
    const outcomes: AppendOutcome[] = batches.map((b) => {
      try {
        applyBatch(b);
        return { ok: true };
      } catch (e) {
        if (!(e instanceof LoomError)) throw e;
        return { ok: false, error: e };
      }
    });
    hooks.beforeCommit?.(batches);
    return outcomes;
  });

  /**
   * Appends land in `events_hot`, ordered by arrival, so a group commit of many executions
   * dirties a few pages instead of one per execution; every SETTLE_AT_ROWS rows (counted by this
   * connection) they move to `events`, clustered by execution, in one transaction that writes
   * each execution's page once. Reads see both tables.
   */
  let hotRows = q.hotCount.get()?.n ?? 0;
  const settleTx = db.transaction(() => {
    q.settle.run();
    q.clearHot.run();
  });
  let settleAt = SETTLE_AT_ROWS;
  /**
   * Best effort: the appends it follows are committed whatever happens here. A move that fails
   * (busy past the timeout, a full disk) is tried again after another SETTLE_AT_ROWS rows.
   */
  function settleHot(): void {
    try {
      settleTx.immediate();
      hotRows = 0;
      settleAt = SETTLE_AT_ROWS;
    } catch {
      settleAt = hotRows + SETTLE_AT_ROWS;
    }
  }

  const acquireTx = db.transaction(
    (id: string, owner: string, ttlMs: number, nowMs: number, takeoverFence?: number) => {
      const row = q.getLease.get(id);
      const current = row && {
        owner: row.owner ?? undefined,
        fence: row.fence,
        expiresAtMs: row.expires_at,
      };
      const opts = takeoverFence === undefined ? { nowMs } : { nowMs, takeoverFence };
      if (!leaseAvailable(current, owner, opts)) return undefined;
      const lease: Lease = {
        executionId: id,
        owner,
        fence: (row?.fence ?? 0) + 1,
        expiresAtMs: nowMs + ttlMs,
      };
      q.putLease.run(id, owner, lease.fence, lease.expiresAtMs);
      known.delete(id);
      return lease;
    },
  );

  return {
    kind: "sqlite",

    async appendMany(batches) {
      let outcomes: AppendOutcome[];
      try {
        outcomes = appendTx.immediate(batches);
      } catch (e) {
        known.clear();
        throw ensureError(e);
      }
      batches.forEach((b, i) => {
        if (outcomes[i]?.ok) hotRows += b.events.length;
      });
      if (hotRows >= settleAt) settleHot();
      return outcomes;
    },

    async read(id, fromSeq = 0, limit?: number) {
      const max = limit === undefined ? -1 : Math.max(0, limit);
      return q.read
        .all({ id, from: Math.max(0, fromSeq), limit: max })
        .map((r) => envelopeOf(id, r));
    },

    async head(id) {
      return q.head.get({ id })?.head ?? -1;
    },

    async list(query: ListQuery = {}) {
      const where: string[] = [];
      const args: (string | number)[] = [];
      if (query.status) {
        if (query.status.length === 0) return [];
        where.push(`status IN (${query.status.map(() => "?").join(", ")})`);
        args.push(...query.status);
      }
      if (query.flow !== undefined) {
        where.push("flow = ?");
        args.push(query.flow);
      }
      if (query.afterId !== undefined) {
        where.push("id > ?");
        args.push(query.afterId);
      }
      const sql =
        "SELECT id, flow, status, created_at," +
        ` ${headOf("id")} AS head,` +
        // Appends go to events_hot only and a settle moves all of it, so an execution's hot
        // rows, when it has any, are its newest: two index seeks, no sort.
        " COALESCE((SELECT at FROM events_hot WHERE execution_id = id ORDER BY seq DESC LIMIT 1)," +
        " (SELECT at FROM events WHERE execution_id = id ORDER BY seq DESC LIMIT 1)) AS updated_at" +
        " FROM executions" +
        (where.length ? ` WHERE ${where.join(" AND ")}` : "") +
        " ORDER BY id" +
        (query.limit !== undefined ? ` LIMIT ${Math.max(0, Math.floor(query.limit))}` : "");
      return db
        .prepare<(string | number)[], ExecutionRow>(sql)
        .all(...args)
        .map(summaryOf);
    },

    async saveSnapshot(id, snapshot) {
      q.saveSnapshot.run(id, snapshot.seq, JSON.stringify(snapshot.state));
    },

    async loadSnapshot(id) {
      const row = q.loadSnapshot.get(id);
      return row ? { seq: row.seq, state: JSON.parse(row.state) as Snapshot["state"] } : undefined;
    },

    async acquireLease(id, owner, opts) {
      return acquireTx.immediate(id, owner, opts.ttlMs, opts.nowMs, opts.takeoverFence);
    },

    async renewLease(id, owner, fence, opts) {
      return q.renewLease.run(opts.nowMs + opts.ttlMs, id, owner, fence).changes === 1;
    },

    async releaseLease(id, owner, fence) {
      q.releaseLease.run(id, owner, fence);
    },

    async getLease(id) {
      const row = q.getLease.get(id);
      if (!row) return undefined;
      return {
        executionId: id,
        owner: row.owner ?? undefined,
        fence: row.fence,
        expiresAtMs: row.expires_at,
      };
    },

    async dueTimers(nowMs, limit): Promise<DueTimer[]> {
      return q.due.all(nowMs, limit).map((r) => ({
        executionId: r.execution_id,
        timerId: r.timer_id,
        wakeAtMs: r.wake_at,
      }));
    },

    async nextWakeAt() {
      return q.nextWake.get()?.w ?? undefined;
    },

    async deleteTimer(id, timerId) {
      q.clearTimer.run(id, timerId);
    },

    async deferTimer(id, timerId, wakeAtMs) {
      q.deferTimer.run(wakeAtMs, id, timerId);
    },

    async putSchedule(s) {
      q.putSchedule.run({
        name: s.name,
        flow: s.flow,
        cron: s.cron,
        timezone: s.timezone,
        input: s.input === undefined ? null : jsonText(s.input),
        fromMs: s.fromMs,
      });
    },

    async listSchedules() {
      return q.schedules.all().map(scheduleOf);
    },

    async advanceSchedule(name, cursorMs) {
      q.advanceSchedule.run(cursorMs, name, cursorMs);
    },

    async deleteSchedule(name) {
      q.deleteSchedule.run(name);
    },

    ...sqliteInbox(db),

    ...sqliteKeys(db),

    ...sqliteRetention(db, headOf, (id) => known.delete(id)),

    async takeNotices(owner) {
      const rows = q.notices.all(owner);
      const lastRow = rows[rows.length - 1];
      if (!lastRow) return [];
      q.forgetNotices.run(owner, lastRow.id);
      return rows.map((r) => ({
        executionId: r.execution_id,
        kind: r.kind as NoticeKind,
        atMs: r.at,
      }));
    },

    async close() {
      if (db.open) db.close();
    },
  };
}

function migrate(db: Database.Database): void {
  db.transaction(() => {
    const version = db.pragma("user_version", { simple: true }) as number;
    MIGRATIONS.slice(version).forEach((sql, i) => {
      db.exec(sql);
      db.pragma(`user_version = ${version + i + 1}`);
    });
  }).immediate();
}
