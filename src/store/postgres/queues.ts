/**
 * Queues on PostgreSQL (S26..S29, migration 7).
 *
 * Q1. An admission is one transaction, READ COMMITTED, whose first statement takes a
 *     transaction-scoped advisory lock named after the schema and the queue: admitters of one
 *     queue, in every process of the fleet, run one at a time. Its second statement starts after
 *     the lock is held, so its snapshot holds every admission committed before (READ COMMITTED
 *     takes one per statement; a REPEATABLE READ transaction would have taken it with the lock's
 *     statement, before the wait, which is why the level is set).
 * Q2. That statement counts the queue's active executions (queue-admit.ts QA3), in all and by key,
 *     ranks the waiting ones of each key in admission order (a window function) so that a key's
 *     candidates past its free slots are passed over (QA2), takes the first that fit the queue's
 *     free slots and the asked limit, and takes their leases (fence + 1, or a new row at 1) in the
 *     same statement. Its ON CONFLICT re-checks each lease on the row's latest version, so a lease
 *     another owner took meanwhile (an acquire, not an admission) is not taken over.
 * Q3. Nothing else makes an execution of a queue active: the append routine moves a status only
 *     among active ones or to an end (which frees a slot), and a queued execution becomes active
 *     only by an admission, serialized by Q1. So what Q2 counts is an upper bound of what is
 *     active when it commits, and concurrent admitters never pass a limit.
 * Q4. An admitted lease keeps its row's `runnable` flag false (leases.ts L4): the status is still
 *     `queued`, which no claim takes (S17); the batch that appends its admission sets the flag
 *     with its status (append-routine.ts R9).
 * Q5. The walks use the partial index `executions_queued` (the queued executions of a queue in
 *     admission order) and `executions_by_queue` (a queue's executions by status): an admission
 *     reads the queue's queued and active executions, not the store's.
 */
import type pg from "pg";
import type { Admitted, QueueStore, QueuedExecution } from "../spi.ts";
import { ACTIVE_STATUSES, checkAdmit } from "../queue-admit.ts";
import { run, statement, transaction, type Tables } from "./db.ts";

const ACTIVE = ACTIVE_STATUSES.map((s) => `'${s}'`).join(", ");
/** SQL over `e` (executions) and `l` (its lease, left-joined): whether the lease is live at `now`. */
const live = (now: string) => `(l.owner IS NOT NULL AND l.expires_at > ${now})`;
const ORDER = "e.queue_priority, e.created_at, e.id";

/** The advisory lock's name (Q1): one per schema and queue. */
export const queueLockName = (schema: string, queue: string) => `loom.queue:${schema}:${queue}`;

/**
 * Q2: $1 queue, $2 now, $3 flows, $4 limit, $5 concurrency, $6 key concurrency (null: none),
 * $7 owner, $8 the leases' expiry. Exported for tests' EXPLAIN.
 */
export function admitSql(t: Tables): string {
  const from = `${t.executions} e LEFT JOIN ${t.leases} l ON l.execution_id = e.id`;
  return `WITH active AS (
       SELECT e.queue_key AS key FROM ${from}
       WHERE e.queue = $1::text AND e.status IN ('queued', ${ACTIVE})
         AND (e.status <> 'queued' OR ${live("$2::bigint")})
     ), by_key AS (
       SELECT key, count(*) AS n FROM active WHERE key IS NOT NULL GROUP BY key
     ), waiting AS (
       SELECT e.id, e.queue_priority, e.created_at,
         CASE WHEN e.queue_key IS NULL THEN 0 ELSE coalesce(b.n, 0)
           + row_number() OVER (PARTITION BY e.queue_key ORDER BY ${ORDER}) END AS slot
       FROM ${from} LEFT JOIN by_key b ON b.key = e.queue_key
       WHERE e.queue = $1::text AND e.status = 'queued' AND NOT ${live("$2::bigint")}
         AND (e.queue_not_before IS NULL OR e.queue_not_before <= $2::bigint)
         AND e.flow = ANY($3::text[])
     ), picked AS (
       SELECT w.id FROM waiting w WHERE $6::bigint IS NULL OR w.slot <= $6::bigint
       ORDER BY w.queue_priority, w.created_at, w.id
       LIMIT greatest(0, least($4::bigint,
         coalesce($5::bigint - (SELECT count(*) FROM active), $4::bigint)))
     )
     INSERT INTO ${t.leases} AS l (execution_id, owner, fence, expires_at, runnable)
     SELECT p.id, $7::text, 1, $8::bigint, false FROM picked p
     ON CONFLICT (execution_id) DO UPDATE
       SET owner = excluded.owner, fence = l.fence + 1, expires_at = excluded.expires_at
       WHERE l.owner IS NULL OR l.expires_at <= $2::bigint
     RETURNING l.execution_id, l.fence, l.expires_at`;
}

interface WaitingRow {
  id: string;
  flow: string;
  key: string | null;
  priority: number;
  created_at: number;
  not_before: number | null;
}

function queueStatements(t: Tables) {
  const from = `${t.executions} e LEFT JOIN ${t.leases} l ON l.execution_id = e.id`;
  const waiting = `FROM ${from} WHERE e.queue = $1 AND e.status = 'queued' AND NOT ${live("$2")}`;
  return {
    admit: statement("admit_queued", admitSql(t)),
    active: statement(
      "queue_active",
      `SELECT e.queue_key AS key, count(*)::int AS n FROM ${from}
       WHERE e.queue = $1 AND e.status IN ('queued', ${ACTIVE})
         AND (e.status <> 'queued' OR ${live("$2")})
       GROUP BY e.queue_key`,
    ),
    waiting: statement(
      "queue_waiting",
      `SELECT e.id, e.flow, e.queue_key AS key, e.queue_priority AS priority, e.created_at,
         e.queue_not_before AS not_before ${waiting} ORDER BY ${ORDER} LIMIT $3`,
    ),
    waitingCount: statement("queue_waiting_count", `SELECT count(*)::int AS n ${waiting}`),
    names: statement(
      "queue_names",
      `SELECT DISTINCT queue FROM ${t.executions}
       WHERE status = 'queued' AND queue IS NOT NULL ORDER BY queue`,
    ),
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

export function postgresQueues(pool: pg.Pool, t: Tables, schema: string): QueueStore {
  const s = queueStatements(t);
  return {
    async admitQueued(owner, opts) {
      checkAdmit(owner, opts);
      const { queue, nowMs, limit, limits } = opts;
      if (opts.flows.length === 0 || limit === 0) return [];
      const expiresAtMs = nowMs + opts.ttlMs;
      const { rows } = await transaction(pool, async (tx) => {
        // Q1: before any other statement of the transaction.
        tx.send({ text: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED" });
        tx.send({
          text: "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0))",
          values: [queueLockName(schema, queue)],
        });
        return tx.query<{ execution_id: string; fence: number; expires_at: number }>(
          s.admit([
            queue,
            nowMs,
            [...opts.flows],
            limit,
            limits.concurrency ?? null,
            limits.keyConcurrency ?? null,
            owner,
            expiresAtMs,
          ]),
        );
      });
      const admitted: Admitted[] = rows.map((r) => ({
        executionId: r.execution_id,
        fence: r.fence,
        expiresAtMs: r.expires_at,
      }));
      return admitted.sort((a, b) => (a.executionId < b.executionId ? -1 : 1));
    },

    async queueView(queue, { nowMs, limit }) {
      const [active, waiting, count] = await Promise.all([
        run<{ key: string | null; n: number }>(pool, s.active([queue, nowMs])),
        run<WaitingRow>(pool, s.waiting([queue, nowMs, Math.max(0, limit)])),
        run<{ n: number }>(pool, s.waitingCount([queue, nowMs])),
      ]);
      const activeByKey: Record<string, number> = {};
      let total = 0;
      for (const r of active.rows) {
        total += r.n;
        if (r.key !== null) activeByKey[r.key] = r.n;
      }
      return {
        queue,
        active: total,
        activeByKey,
        waiting: waiting.rows.map(queuedOf),
        waitingCount: count.rows[0]?.n ?? 0,
      };
    },

    async queueNames() {
      const { rows } = await run<{ queue: string }>(pool, s.names([]));
      return rows.map((r) => r.queue);
    },
  };
}
