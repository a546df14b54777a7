/**
 * Rate limiters (spi-limiters.ts S30..S34) on PostgreSQL (migration 7), shared by a fleet. What a
 * reserve answers is ../limiter-rules.ts's, as in the other stores; this module makes it one
 * serialized step across processes.
 *
 * PL1. A reserve is one transaction that first takes a transaction-scoped advisory lock on a hash
 *     of (schema, limiter), so the reserves of one limiter run one at a time fleet-wide and those
 *     of different limiters side by side. At READ COMMITTED each statement reads what committed
 *     before it began: the state read after the lock sees every grant and waiter of the reserves
 *     before, so no two reserves both count the same free capacity. A block takes the lock too, so
 *     a reserve never grants on a state read before a block it follows committed.
 * PL2. A reserve costs two round trips when it grants (BEGIN, the lock and the state read; then its
 *     writes and COMMIT, pipelined: db.ts D4) and three when it refuses (the free-at read, LR4).
 * PL3. Settle and withdraw are one statement each, without the lock: a settle only changes the
 *     charge of a call that already ran, and a withdraw only removes a place; a reserve that read
 *     either before it committed answers as if it came just before.
 */
import type pg from "pg";
import { InvariantViolation } from "../../kernel/errors.ts";
import {
  checkLimiterName,
  checkReserve,
  checkUse,
  judge,
  retryAtMs,
  time,
  type Excess,
  type FreeAt,
  type LimiterState,
} from "../limiter-rules.ts";
import type { LimiterAnswer, LimiterAsk, LimiterStore, RateLimit } from "../spi-limiters.ts";
import { run, transaction, type Tables, type Tx } from "./db.ts";
import { limiterStatements } from "./limiter-sql.ts";

type Statements = ReturnType<typeof limiterStatements>;

interface StateRow {
  requests: number;
  input: number;
  output: number;
  in_flight: number;
  blocked_until_ms: number | null;
  granted: boolean;
  own_live: boolean | null;
  older: number;
}

interface FreeAtRow {
  requests: number | null;
  input: number | null;
  output: number | null;
  tokens: number | null;
  concurrent: number | null;
}

export function postgresLimiters(pool: pg.Pool, t: Tables, schema: string): LimiterStore {
  const s = limiterStatements(t);
  const lockKey = (limiter: string) => `loom.limiter:${schema}:${limiter}`;

  return {
    async reserve(limiter, limit, ask, nowMs) {
      checkReserve(limiter, limit, ask, nowMs);
      return transaction(pool, async (tx) => {
        tx.send(s.lock([lockKey(limiter)]));
        return reserveLocked(tx, s, limiter, limit, ask, nowMs);
      });
    },

    async settle(limiter, id, used, nowMs) {
      checkUse(limiter, id, used, nowMs);
      await run(pool, s.settle([limiter, id, used.inputTokens, used.outputTokens, nowMs]));
    },

    async withdraw(limiter, id) {
      checkLimiterName(limiter);
      await run(pool, s.dropWaiter([limiter, id]));
    },

    async blockLimiter(limiter, untilMs) {
      checkLimiterName(limiter);
      time("untilMs", untilMs);
      await transaction(pool, async (tx) => {
        tx.send(s.lock([lockKey(limiter)]));
        tx.send(s.block([limiter, untilMs]));
        return Promise.resolve();
      });
    },

    async limiterView(limiter, nowMs) {
      checkLimiterName(limiter);
      time("nowMs", nowMs);
      const [view, waiting] = await Promise.all([
        run<Omit<StateRow, "granted" | "own_live" | "older">>(pool, s.view([limiter, nowMs])),
        run<{ id: string; execution_id: string; since_ms: number }>(
          pool,
          s.waiting([limiter, nowMs]),
        ),
      ]);
      const row = view.rows[0];
      const block = row?.blocked_until_ms ?? null;
      return {
        limiter,
        requests: row?.requests ?? 0,
        inputTokens: row?.input ?? 0,
        outputTokens: row?.output ?? 0,
        inFlight: row?.in_flight ?? 0,
        ...(block !== null && block > nowMs ? { blockedUntilMs: block } : {}),
        waiting: waiting.rows.map((w) => ({
          id: w.id,
          executionId: w.execution_id,
          sinceMs: w.since_ms,
        })),
      };
    },

    async limiterNames() {
      const { rows } = await run<{ limiter: string }>(pool, s.names([]));
      return rows.map((r) => r.limiter);
    },
  };
}

/** S30, S31 under the lock (PL1): read the state, judge, write the grant or the waiter, prune. */
async function reserveLocked(
  tx: Tx,
  s: Statements,
  limiter: string,
  limit: RateLimit,
  ask: LimiterAsk,
  nowMs: number,
): Promise<LimiterAnswer> {
  const from = nowMs - limit.windowMs;
  const { rows } = await tx.query<StateRow>(s.state([limiter, nowMs, from, ask.id]));
  const row = rows[0];
  if (!row) throw new InvariantViolation("limiter state: the query answered no row");
  if (row.granted) return { granted: true };
  const state: LimiterState = {
    inWindow: { requests: row.requests, inputTokens: row.input, outputTokens: row.output },
    inFlight: row.in_flight,
    blockedUntilMs:
      row.blocked_until_ms !== null && row.blocked_until_ms > nowMs
        ? row.blocked_until_ms
        : undefined,
    older: row.older,
  };
  const verdict = judge(limit, ask, state);
  tx.send(s.putWindow([limiter, limit.windowMs]));
  tx.send(s.pruneGrants([limiter, nowMs, from]));
  if (verdict.granted) {
    tx.send(s.dropWaiter([limiter, ask.id]));
    tx.send(s.pruneWaiters([limiter, nowMs]));
    const charges = [ask.requests, ask.inputTokens, ask.outputTokens, ask.holdUntilMs];
    tx.send(s.grant([limiter, ask.id, ask.executionId, ask.sentByMs ?? nowMs, ...charges]));
    return { granted: true };
  }
  if (!verdict.alone && row.own_live === true) {
    tx.send(s.touchWaiter([limiter, ask.id, ask.waitUntilMs]));
  }
  tx.send(s.pruneWaiters([limiter, nowMs]));
  if (!verdict.alone && row.own_live !== true) {
    tx.send(s.addWaiter([limiter, ask.id, ask.executionId, nowMs, ask.waitUntilMs]));
  }
  const freeAt = verdict.alone ? {} : await freeAtOf(tx, s, limiter, nowMs, from, verdict.excess);
  return {
    granted: false,
    retryAtMs: retryAtMs(limit, nowMs, verdict, state, freeAt),
    position: state.older,
  };
}

async function freeAtOf(
  tx: Tx,
  s: Statements,
  limiter: string,
  nowMs: number,
  from: number,
  excess: Excess,
): Promise<FreeAt> {
  const need = (n: number | undefined) => n ?? null;
  const slots = excess.concurrent === undefined ? null : excess.concurrent - 1;
  const { rows } = await tx.query<FreeAtRow>(
    s.freeAt([
      limiter,
      nowMs,
      from,
      need(excess.requests),
      need(excess.inputTokens),
      need(excess.outputTokens),
      need(excess.tokens),
      slots,
    ]),
  );
  const row = rows[0];
  const freeAt: FreeAt = {};
  if (row?.requests != null) freeAt.requests = row.requests;
  if (row?.input != null) freeAt.inputTokens = row.input;
  if (row?.output != null) freeAt.outputTokens = row.output;
  if (row?.tokens != null) freeAt.tokens = row.tokens;
  if (row?.concurrent != null) freeAt.concurrent = row.concurrent;
  return freeAt;
}
