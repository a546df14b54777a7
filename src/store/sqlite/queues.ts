/**
 * Queues on SQLite (S26..S29). An admission is one `BEGIN IMMEDIATE` transaction: it counts the
 * queue's active executions, walks its waiting ones in admission order (the partial index
 * `executions_queued`, migration 9) until nothing more fits (queue-admit.ts QA2), and takes their
 * leases, with every other writer of the file (another process's admission included) held off by
 * SQLite's lock: the one serialized step per queue of S26. Each lease it takes moves a fence, so
 * it drops what the append path caches about that execution (append.ts A2).
 */
import type Database from "better-sqlite3";
import type { Admitted, AdmitOptions, QueueStore, QueuedExecution } from "../spi.ts";
import { ACTIVE_STATUSES, checkAdmit, pickAdmitted, type ActiveCount } from "../queue-admit.ts";

const ACTIVE = ACTIVE_STATUSES.map((s) => `'${s}'`).join(", ");
/** SQL over `e` (executions) and `l` (its lease, left-joined): QA3 at @now. */
const LIVE = "(l.owner IS NOT NULL AND l.expires_at > @now)";
const FROM = "FROM executions e LEFT JOIN leases l ON l.execution_id = e.id";
const ORDER = "ORDER BY e.queue_priority, e.created_at, e.id";

interface WaitingRow {
  id: string;
  flow: string;
  key: string | null;
  priority: number;
  created_at: number;
  not_before: number | null;
}

const WAITING = `SELECT e.id, e.flow, e.queue_key AS key, e.queue_priority AS priority,
    e.created_at, e.queue_not_before AS not_before ${FROM}
  WHERE e.queue = @queue AND e.status = 'queued' AND NOT ${LIVE}`;

/** What admission reads (@queue, @now, @flows), exported for tests' EXPLAIN QUERY PLAN. */
export const ADMISSION_SQL = {
  active: `SELECT e.queue_key AS key, COUNT(*) AS n ${FROM}
    WHERE e.queue = @queue AND e.status IN ('queued', ${ACTIVE})
      AND (e.status <> 'queued' OR ${LIVE})
    GROUP BY e.queue_key`,
  admissible: `${WAITING} AND (e.queue_not_before IS NULL OR e.queue_not_before <= @now)
      AND e.flow IN (SELECT value FROM json_each(@flows)) ${ORDER}`,
};

function queueStatements(db: Database.Database) {
  const waiting = WAITING;
  return {
    active: db.prepare<{ queue: string; now: number }, { key: string | null; n: number }>(
      ADMISSION_SQL.active,
    ),
    admissible: db.prepare<{ queue: string; now: number; flows: string }, WaitingRow>(
      ADMISSION_SQL.admissible,
    ),
    waiting: db.prepare<{ queue: string; now: number; limit: number }, WaitingRow>(
      `${waiting} ${ORDER} LIMIT @limit`,
    ),
    waitingCount: db
      .prepare<{ queue: string; now: number }, number>(
        `SELECT COUNT(*) ${FROM} WHERE e.queue = @queue AND e.status = 'queued' AND NOT ${LIVE}`,
      )
      .pluck(),
    take: db
      .prepare<[string, string, number], number>(
        `INSERT INTO leases (execution_id, owner, fence, expires_at) VALUES (?, ?, 1, ?)
         ON CONFLICT (execution_id) DO UPDATE SET owner = excluded.owner,
           fence = leases.fence + 1, expires_at = excluded.expires_at
         RETURNING fence`,
      )
      .pluck(),
    names: db
      .prepare<[], string>(
        "SELECT DISTINCT queue FROM executions WHERE status = 'queued' AND queue IS NOT NULL ORDER BY queue",
      )
      .pluck(),
  };
}

const queuedOf = (r: WaitingRow): QueuedExecution => ({
  executionId: r.id,
  flow: r.flow,
  ...(r.key === null ? {} : { key: r.key }),
  priority: r.priority,
  createdAtMs: r.created_at,
  ...(r.not_before === null ? {} : { notBeforeMs: r.not_before }),
});

export function sqliteQueues(db: Database.Database, forget: (id: string) => void): QueueStore {
  const q = queueStatements(db);
  const countOf = (queue: string, now: number): ActiveCount => {
    const count: ActiveCount = { active: 0, byKey: new Map() };
    for (const r of q.active.all({ queue, now })) {
      count.active += r.n;
      if (r.key !== null) count.byKey.set(r.key, r.n);
    }
    return count;
  };
  const admitTx = db.transaction((owner: string, opts: AdmitOptions): Admitted[] => {
    const { queue, nowMs: now } = opts;
    const rows = q.admissible.iterate({ queue, now, flows: JSON.stringify(opts.flows) });
    let picked: { id: string }[];
    try {
      picked = pickAdmitted(
        (function* () {
          for (const r of rows) yield { id: r.id, key: r.key ?? undefined };
        })(),
        countOf(queue, now),
        opts,
      );
    } finally {
      // A walk that stopped early, or never started (the queue is full), ends the statement.
      rows.return?.();
    }
    const expiresAtMs = now + opts.ttlMs;
    return picked.map(({ id }) => {
      const fence = q.take.get(id, owner, expiresAtMs) as number;
      forget(id);
      return { executionId: id, fence, expiresAtMs };
    });
  });

  return {
    async admitQueued(owner, opts) {
      checkAdmit(owner, opts);
      if (opts.flows.length === 0 || opts.limit === 0) return [];
      return admitTx.immediate(owner, opts);
    },

    async queueView(queue, { nowMs: now, limit }) {
      const read = db.transaction(() => {
        const count = countOf(queue, now);
        const waiting = q.waiting.all({ queue, now, limit: Math.max(0, limit) }).map(queuedOf);
        return {
          queue,
          active: count.active,
          activeByKey: Object.fromEntries(count.byKey),
          waiting,
          waitingCount: q.waitingCount.get({ queue, now }) ?? 0,
        };
      });
      return read.deferred();
    },

    async queueNames() {
      return q.names.all();
    },
  };
}
