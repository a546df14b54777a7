/**
 * The statements of the PostgreSQL rate limiters (limiters.ts), over migration 7's tables. A
 * grant's charge is its used tokens once settled (`used_input` set), its reserved ones before
 * (limiter-rules.ts LR2). Parameters: $1 the limiter, $2 nowMs, $3 the window's open end
 * (nowMs - windowMs), unless a statement says otherwise.
 */
import { statement, type Tables } from "./db.ts";

const CHARGES = `coalesce(sum(requests), 0)::bigint AS requests,
  coalesce(sum(coalesce(used_input, input_tokens)), 0)::bigint AS input,
  coalesce(sum(coalesce(used_output, output_tokens)), 0)::bigint AS output`;

export function limiterStatements(t: Tables) {
  return { ...reserveStatements(t), ...otherStatements(t) };
}

/** What a reserve reads and writes under its lock (limiters.ts PL1). */
function reserveStatements(t: Tables) {
  return {
    /** PL1: one reserve at a time per limiter, fleet-wide, until the transaction ends. $1 the key. */
    lock: statement(
      "limiter_lock",
      "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0))",
    ),
    /**
     * The limiter's state as the ask ($4, its id) sees it: the window's charges, the slots held,
     * the block, whether the id holds a grant, its own waiter row, and the live waiters before it
     * (LR5: all live others when it has no live place).
     */
    state: statement(
      "limiter_state",
      `SELECT c.requests, c.input, c.output,
        (SELECT count(*) FROM ${t.limiterGrants} WHERE limiter = $1 AND used_input IS NULL
          AND hold_until_ms > $2) AS in_flight,
        (SELECT blocked_until_ms FROM ${t.limiters} WHERE name = $1) AS blocked_until_ms,
        EXISTS (SELECT 1 FROM ${t.limiterGrants} WHERE limiter = $1 AND id = $4) AS granted,
        o.wait_until_ms > $2 AS own_live,
        (SELECT count(*) FROM ${t.limiterWaiters} w WHERE w.limiter = $1 AND w.wait_until_ms > $2
          AND w.id <> $4 AND (o.n IS NULL OR o.wait_until_ms <= $2
            OR (w.since_ms, w.n) < (o.since_ms, o.n))) AS older
      FROM (SELECT ${CHARGES} FROM ${t.limiterGrants} WHERE limiter = $1 AND at_ms > $3) c
      LEFT JOIN ${t.limiterWaiters} o ON o.limiter = $1 AND o.id = $4`,
    ),
    /** LR4: $4..$7 what must leave per dimension (null: nothing), $8 the slots - 1 (null: none). */
    freeAt: statement(
      "limiter_free_at",
      `SELECT min(CASE WHEN cr >= $4 THEN at_ms END) AS requests,
        min(CASE WHEN ci >= $5 THEN at_ms END) AS input,
        min(CASE WHEN co >= $6 THEN at_ms END) AS output,
        min(CASE WHEN ci + co >= $7 THEN at_ms END) AS tokens,
        (SELECT hold_until_ms FROM ${t.limiterGrants} WHERE $8::bigint IS NOT NULL
          AND limiter = $1 AND used_input IS NULL AND hold_until_ms > $2
          ORDER BY hold_until_ms LIMIT 1 OFFSET $8) AS concurrent
      FROM (SELECT at_ms, sum(requests) OVER w AS cr,
          sum(coalesce(used_input, input_tokens)) OVER w AS ci,
          sum(coalesce(used_output, output_tokens)) OVER w AS co
        FROM ${t.limiterGrants} WHERE limiter = $1 AND at_ms > $3
        WINDOW w AS (ORDER BY at_ms, id ROWS UNBOUNDED PRECEDING)) g`,
    ),
    /** S34. */
    pruneGrants: statement(
      "limiter_prune_grants",
      `DELETE FROM ${t.limiterGrants} WHERE limiter = $1 AND at_ms <= $3
        AND (used_input IS NOT NULL OR hold_until_ms <= $2)`,
    ),
    /** S34. ($1, $2) */
    pruneWaiters: statement(
      "limiter_prune_waiters",
      `DELETE FROM ${t.limiterWaiters} WHERE limiter = $1 AND wait_until_ms <= $2`,
    ),
    /** The window a view sums over. ($1, $2 windowMs) */
    putWindow: statement(
      "limiter_put_window",
      `INSERT INTO ${t.limiters} (name, window_ms) VALUES ($1, $2)
      ON CONFLICT (name) DO UPDATE SET window_ms = excluded.window_ms
      WHERE ${t.limiters}.window_ms IS DISTINCT FROM excluded.window_ms`,
    ),
    /** ($1, id, executionId, atMs, requests, input, output, holdUntilMs) */
    grant: statement(
      "limiter_grant",
      `INSERT INTO ${t.limiterGrants} (limiter, id, execution_id, at_ms, requests, input_tokens,
        output_tokens, hold_until_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    ),
    /** ($1, id) */
    dropWaiter: statement(
      "limiter_drop_waiter",
      `DELETE FROM ${t.limiterWaiters} WHERE limiter = $1 AND id = $2`,
    ),
    /** ($1, id, waitUntilMs) */
    touchWaiter: statement(
      "limiter_touch_waiter",
      `UPDATE ${t.limiterWaiters} SET wait_until_ms = $3 WHERE limiter = $1 AND id = $2`,
    ),
    /** ($1, id, executionId, sinceMs, waitUntilMs): a new place, after any expired row of the id. */
    addWaiter: statement(
      "limiter_add_waiter",
      `INSERT INTO ${t.limiterWaiters} (limiter, id, execution_id, since_ms, wait_until_ms)
      VALUES ($1, $2, $3, $4, $5)`,
    ),
  };
}

/** Settles, withdrawals (`dropWaiter`, above), blocks and views. */
function otherStatements(t: Tables) {
  return {
    /** ($1, id, usedInput, usedOutput, nowMs) */
    settle: statement(
      "limiter_settle",
      `UPDATE ${t.limiterGrants} SET used_input = $3, used_output = $4,
        at_ms = LEAST(at_ms, $5::bigint)
      WHERE limiter = $1 AND id = $2 AND used_input IS NULL`,
    ),
    /** ($1, untilMs) */
    block: statement(
      "limiter_block",
      `INSERT INTO ${t.limiters} (name, blocked_until_ms) VALUES ($1, $2)
      ON CONFLICT (name) DO UPDATE SET blocked_until_ms =
        GREATEST(${t.limiters}.blocked_until_ms, excluded.blocked_until_ms)`,
    ),
    /** ($1, $2): the window, then the charges with it. */
    view: statement(
      "limiter_view",
      `SELECT l.blocked_until_ms, c.requests, c.input, c.output,
        (SELECT count(*) FROM ${t.limiterGrants} WHERE limiter = $1 AND used_input IS NULL
          AND hold_until_ms > $2) AS in_flight
      FROM (SELECT 1) one LEFT JOIN ${t.limiters} l ON l.name = $1,
        LATERAL (SELECT ${CHARGES} FROM ${t.limiterGrants}
          WHERE limiter = $1 AND at_ms > $2 - coalesce(l.window_ms, 0)) c`,
    ),
    /** ($1, $2) */
    waiting: statement(
      "limiter_waiting",
      `SELECT id, execution_id, since_ms FROM ${t.limiterWaiters}
      WHERE limiter = $1 AND wait_until_ms > $2 ORDER BY since_ms, n`,
    ),
    names: statement(
      "limiter_names",
      `SELECT limiter FROM ${t.limiterGrants} UNION SELECT limiter FROM ${t.limiterWaiters}
      ORDER BY 1`,
    ),
  };
}
