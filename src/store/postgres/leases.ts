/**
 * Leases on PostgreSQL (S6) and fleet claims (S17).
 *
 * L1. An acquire is one INSERT ... ON CONFLICT DO UPDATE whose WHERE is the compare-and-set of
 *     `leaseAvailable` (append-check.ts): PostgreSQL evaluates it on the row's latest version
 *     under the row's lock, so of concurrent acquires exactly the ones the lease allows win, each
 *     moving the fence by one.
 * L2. A claim locks candidate lease and execution rows FOR UPDATE SKIP LOCKED (a row another
 *     claimer or an append holds is passed over, never waited for) and takes their leases in the
 *     same statement; PostgreSQL re-checks a locked row that changed since the statement began on
 *     its latest version, so a lease taken meanwhile, or an execution that ended, is not claimed.
 *     Two claimers never get the same execution.
 * L3. Only executions with a lease row can be claimed: every execution has one from its first
 *     append (S3) until it is deleted.
 * L4. The claim walks the partial index `leases_claimable` (migration 3): lease rows whose
 *     `runnable` flag is set, by when their lease is free (`freeAtSql`: a released one at once,
 *     a held one at its expiry), then id. The claim reads two ranges of it, the expired leases
 *     (0 to now) and then the released ones (-1), so it reads only what is free or expired, not
 *     the executions in flight. Found: every runnable execution (pending or
 *     running) whose lease is free or expired, because the flag is true on every lease row whose
 *     execution is runnable: the append routine (R9) sets it exactly with each batch's status, in
 *     the batch's transaction under the lease row's lock; an acquire that creates a row has no
 *     execution yet (false, the routine sets it with the first batch); the column's default is
 *     true, so a row an earlier release's routine creates is found too. Claimed: only a runnable
 *     one, because the claim still reads the execution's status on the row it locks (L2), and never
 *     trusts the flag alone: an earlier release's routine (`loom_append_4` and before, during a
 *     rolling upgrade) leaves the flag true on an execution it ends. Such a stale flag costs a walk
 *     only, and the claim that walks it clears it, in the same statement.
 */
import type pg from "pg";
import { checkClaim } from "../append-check.ts";
import type { FleetStore, Lease, LeaseStore } from "../spi.ts";
import { run, statement, type Tables } from "./db.ts";
import { freeAtSql, RUNNABLE_SQL } from "./tables.ts";
import { MAX_PAYLOAD_BYTES, wakeText } from "./wakes.ts";

interface LeaseRow {
  execution_id: string;
  owner: string | null;
  fence: number;
  expires_at: number;
}

const toLease = (r: LeaseRow): Lease => ({
  executionId: r.execution_id,
  owner: r.owner ?? undefined,
  fence: r.fence,
  expiresAtMs: r.expires_at,
});

/**
 * L2, L4: the claim ($1 flows, $2 now, $3 limit, $4 owner, $5 the new expiry). Candidates are
 * what the index finds free at $2, expired leases first (oldest expiry first: a dead member's
 * work does not wait behind a backlog of new work), then released ones in id order, each locked
 * with its execution row; `live` is the status read on the locked row (L2), the flag's stale ones
 * are cleared (`stale`, L4) and the live ones taken. The outer UPDATE repeats the lease test:
 * belt and braces for the row's latest version. Exported for the benchmark's EXPLAIN
 * (bench/fleet-claim.ts).
 */
export function claimRunnableSql(t: Tables): string {
  const walk = (where: string, order: string, limit: string) => `
       SELECT l.execution_id, e.status IN (${RUNNABLE_SQL}) AS live
       FROM ${t.leases} l JOIN ${t.executions} e ON e.id = l.execution_id
       WHERE l.runnable AND ${where} AND e.flow = ANY($1::text[])
       ORDER BY ${order} LIMIT ${limit}
       FOR UPDATE OF l, e SKIP LOCKED`;
  const freeAt = freeAtSql("l");
  return `WITH expired AS (${walk(`${freeAt} BETWEEN 0 AND $2`, `${freeAt}, l.execution_id`, "$3")}
     ),
     released AS (${walk(
       `${freeAt} = -1`,
       "l.execution_id",
       "greatest($3 - (SELECT count(*) FROM expired), 0)",
     )}
     ),
     candidates AS (SELECT * FROM expired UNION ALL SELECT * FROM released),
     stale AS (
       UPDATE ${t.leases} l SET runnable = false FROM candidates c
       WHERE l.execution_id = c.execution_id AND NOT c.live
     )
     UPDATE ${t.leases} l SET owner = $4, fence = l.fence + 1, expires_at = $5
     FROM candidates c
     WHERE l.execution_id = c.execution_id AND c.live AND (l.owner IS NULL OR l.expires_at <= $2)
     RETURNING l.execution_id, l.owner, l.fence, l.expires_at`;
}

/** The statements of leases and claims, prepared per connection under their names. */
function leaseStatements(t: Tables) {
  return {
    // L1: mirrors leaseAvailable: free, released, the same owner's, expired, or taken over.
    acquire: statement(
      "acquire_lease",
      `INSERT INTO ${t.leases} AS l (execution_id, owner, fence, expires_at, runnable)
       VALUES ($1, $2, 1, $3, false)
       ON CONFLICT (execution_id) DO UPDATE
         SET owner = excluded.owner, fence = l.fence + 1, expires_at = excluded.expires_at
       WHERE l.owner IS NULL OR l.owner = excluded.owner OR l.expires_at <= $4
         OR l.fence = $5::bigint
       RETURNING execution_id, owner, fence, expires_at`,
    ),
    renew: statement(
      "renew_lease",
      `UPDATE ${t.leases} SET expires_at = $4
       WHERE execution_id = $1 AND owner = $2 AND fence = $3`,
    ),
    // S18: a lease released while its execution is pending or running makes it runnable; one of
    // a queue's executions may free a slot of the queue (S26).
    release: statement(
      "release_lease",
      `WITH released AS (
         UPDATE ${t.leases} SET owner = NULL
         WHERE execution_id = $1 AND owner = $2 AND fence = $3 RETURNING execution_id
       ), x AS (
         SELECT e.status, e.queue, json_build_object('kind', 'queue', 'queue', e.queue)::text AS w
         FROM released r JOIN ${t.executions} e ON e.id = r.execution_id
       )
       SELECT pg_notify($4, $5) FROM x
       WHERE $5::text IS NOT NULL AND x.status IN ('pending', 'running')
       UNION ALL
       SELECT pg_notify($4, x.w) FROM x
       WHERE x.queue IS NOT NULL AND octet_length(x.w) <= ${MAX_PAYLOAD_BYTES}`,
    ),
    get: statement(
      "get_lease",
      `SELECT execution_id, owner, fence, expires_at FROM ${t.leases} WHERE execution_id = $1`,
    ),
    claim: statement("claim_runnable", claimRunnableSql(t)),
  };
}

export function postgresLeases(
  pool: pg.Pool,
  t: Tables,
  channel: string,
): LeaseStore & Pick<FleetStore, "claimRunnable"> {
  const s = leaseStatements(t);
  return {
    async acquireLease(id, owner, opts) {
      const expiresAtMs = opts.nowMs + opts.ttlMs;
      const { rows } = await run<LeaseRow>(
        pool,
        s.acquire([id, owner, expiresAtMs, opts.nowMs, opts.takeoverFence ?? null]),
      );
      const row = rows[0];
      return row ? toLease(row) : undefined;
    },

    async renewLease(id, owner, fence, opts) {
      const result = await run(pool, s.renew([id, owner, fence, opts.nowMs + opts.ttlMs]));
      return result.rowCount === 1;
    },

    async releaseLease(id, owner, fence) {
      await run(
        pool,
        s.release([
          id,
          owner,
          fence,
          channel,
          wakeText({ kind: "runnable", executionId: id }) ?? null,
        ]),
      );
    },

    async getLease(id) {
      const { rows } = await run<LeaseRow>(pool, s.get([id]));
      const row = rows[0];
      return row ? toLease(row) : undefined;
    },

    async claimRunnable(owner, opts) {
      checkClaim(opts);
      const { flows, limit, ttlMs, nowMs } = opts;
      if (flows.length === 0 || limit === 0) return [];
      const { rows } = await run<LeaseRow>(
        pool,
        s.claim([[...flows], nowMs, limit, owner, nowMs + ttlMs]),
      );
      return rows.map(toLease).sort((a, b) => (a.executionId < b.executionId ? -1 : 1));
    },
  };
}
