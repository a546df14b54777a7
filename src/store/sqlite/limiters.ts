/**
 * Rate limiters (spi-limiters.ts S30..S34) on SQLite (migration 10, or the last: migrations.ts).
 * A reserve is one `BEGIN IMMEDIATE` transaction: SQLite's write lock serializes it against every
 * other writer of the file, other processes' included, so its reads and its writes see no one
 * else's in between. What it answers is ../limiter-rules.ts's, as in the other stores.
 */
import type Database from "better-sqlite3";
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
import type {
  LimiterAnswer,
  LimiterAsk,
  LimiterStore,
  LimiterView,
  RateLimit,
} from "../spi-limiters.ts";

/** Named parameters: l the limiter, now, from (now - windowMs, the window's open end). */
interface At {
  l: string;
  now: number;
  from: number;
}

const CHARGES = `coalesce(sum(requests), 0) AS requests,
  coalesce(sum(coalesce(used_input, input_tokens)), 0) AS input,
  coalesce(sum(coalesce(used_output, output_tokens)), 0) AS output`;

function prepare(db: Database.Database) {
  return {
    pruneGrants: db.prepare<At>(`DELETE FROM limiter_grants WHERE limiter = @l AND at_ms <= @from
      AND (used_input IS NOT NULL OR hold_until_ms <= @now)`),
    pruneWaiters: db.prepare<At>(
      "DELETE FROM limiter_waiters WHERE limiter = @l AND wait_until_ms <= @now",
    ),
    putWindow: db.prepare<{ l: string; w: number }>(`INSERT INTO limiters (name, window_ms)
      VALUES (@l, @w) ON CONFLICT (name) DO UPDATE SET window_ms = excluded.window_ms
      WHERE window_ms IS NOT excluded.window_ms`),
    limiter: db.prepare<[string], { window_ms: number | null; blocked_until_ms: number | null }>(
      "SELECT window_ms, blocked_until_ms FROM limiters WHERE name = ?",
    ),
    charges: db.prepare<At, { requests: number; input: number; output: number }>(
      `SELECT ${CHARGES} FROM limiter_grants WHERE limiter = @l AND at_ms > @from`,
    ),
    inFlight: db.prepare<At, { n: number }>(`SELECT count(*) AS n FROM limiter_grants
      WHERE limiter = @l AND used_input IS NULL AND hold_until_ms > @now`),
    granted: db.prepare<[string, string]>(
      "SELECT 1 FROM limiter_grants WHERE limiter = ? AND id = ?",
    ),
    own: db.prepare<[string, string], { n: number; since_ms: number }>(
      "SELECT n, since_ms FROM limiter_waiters WHERE limiter = ? AND id = ?",
    ),
    older: db.prepare<At & { since: number; n: number }, { n: number }>(
      `SELECT count(*) AS n FROM limiter_waiters WHERE limiter = @l AND wait_until_ms > @now
        AND (since_ms < @since OR (since_ms = @since AND n < @n))`,
    ),
    grant: db.prepare(`INSERT INTO limiter_grants (limiter, id, execution_id, at_ms, requests,
      input_tokens, output_tokens, hold_until_ms) VALUES (@l, @id, @executionId, @at, @requests,
      @inputTokens, @outputTokens, @holdUntilMs)`),
    dropWaiter: db.prepare<[string, string]>(
      "DELETE FROM limiter_waiters WHERE limiter = ? AND id = ?",
    ),
    touchWaiter: db.prepare<[number, string, string]>(
      "UPDATE limiter_waiters SET wait_until_ms = ? WHERE limiter = ? AND id = ?",
    ),
    addWaiter: db.prepare(`INSERT INTO limiter_waiters (limiter, id, execution_id, since_ms,
      wait_until_ms) VALUES (@l, @id, @executionId, @now, @waitUntilMs)`),
    freeAt: db.prepare<
      At & { r: number | null; i: number | null; o: number | null; t: number | null },
      {
        requests: number | null;
        input: number | null;
        output: number | null;
        tokens: number | null;
      }
    >(`SELECT min(CASE WHEN cr >= @r THEN at_ms END) AS requests,
        min(CASE WHEN ci >= @i THEN at_ms END) AS input,
        min(CASE WHEN co >= @o THEN at_ms END) AS output,
        min(CASE WHEN ci + co >= @t THEN at_ms END) AS tokens
      FROM (SELECT at_ms, sum(requests) OVER w AS cr,
          sum(coalesce(used_input, input_tokens)) OVER w AS ci,
          sum(coalesce(used_output, output_tokens)) OVER w AS co
        FROM limiter_grants WHERE limiter = @l AND at_ms > @from
        WINDOW w AS (ORDER BY at_ms, id ROWS UNBOUNDED PRECEDING))`),
    holdEnd: db.prepare<At & { k: number }, { hold_until_ms: number }>(
      `SELECT hold_until_ms FROM limiter_grants WHERE limiter = @l AND used_input IS NULL
        AND hold_until_ms > @now ORDER BY hold_until_ms LIMIT 1 OFFSET @k`,
    ),
    settle: db.prepare(`UPDATE limiter_grants SET used_input = @inputTokens,
      used_output = @outputTokens, at_ms = min(at_ms, @now)
      WHERE limiter = @l AND id = @id AND used_input IS NULL`),
    block: db.prepare<{ l: string; until: number }>(`INSERT INTO limiters (name, blocked_until_ms)
      VALUES (@l, @until) ON CONFLICT (name) DO UPDATE
      SET blocked_until_ms = max(coalesce(blocked_until_ms, excluded.blocked_until_ms),
        excluded.blocked_until_ms)`),
    waiting: db.prepare<[string, number], { id: string; execution_id: string; since_ms: number }>(
      `SELECT id, execution_id, since_ms FROM limiter_waiters WHERE limiter = ?
        AND wait_until_ms > ? ORDER BY since_ms, n`,
    ),
    names: db.prepare<[], { limiter: string }>(
      "SELECT limiter FROM limiter_grants UNION SELECT limiter FROM limiter_waiters ORDER BY 1",
    ),
  };
}

type Statements = ReturnType<typeof prepare>;

export function sqliteLimiters(db: Database.Database): LimiterStore {
  const q = prepare(db);
  const reserveTx = db.transaction(
    (l: string, limit: RateLimit, ask: LimiterAsk, now: number): LimiterAnswer => {
      const at = { l, now, from: now - limit.windowMs };
      q.putWindow.run({ l, w: limit.windowMs });
      q.pruneGrants.run(at);
      q.pruneWaiters.run(at);
      if (q.granted.get(l, ask.id)) return { granted: true };
      const own = q.own.get(l, ask.id);
      const state = stateOf(q, at, own);
      const verdict = judge(limit, ask, state);
      if (verdict.granted) {
        if (own) q.dropWaiter.run(l, ask.id);
        q.grant.run({ ...at, ...ask, at: ask.sentByMs ?? now });
        return { granted: true };
      }
      if (!verdict.alone) {
        if (own) q.touchWaiter.run(ask.waitUntilMs, l, ask.id);
        else q.addWaiter.run({ ...at, ...ask });
      }
      const freeAt = verdict.alone ? {} : freeAtOf(q, at, verdict.excess);
      const retry = retryAtMs(limit, now, verdict, state, freeAt);
      return { granted: false, retryAtMs: retry, position: state.older };
    },
  );

  return {
    async reserve(limiter, limit, ask, nowMs) {
      checkReserve(limiter, limit, ask, nowMs);
      return reserveTx.immediate(limiter, limit, ask, nowMs);
    },

    async settle(limiter, id, used, nowMs) {
      checkUse(limiter, id, used, nowMs);
      q.settle.run({ l: limiter, id, ...used, now: nowMs });
    },

    async withdraw(limiter, id) {
      checkLimiterName(limiter);
      q.dropWaiter.run(limiter, id);
    },

    async blockLimiter(limiter, untilMs) {
      checkLimiterName(limiter);
      time("untilMs", untilMs);
      q.block.run({ l: limiter, until: untilMs });
    },

    async limiterView(limiter, nowMs) {
      checkLimiterName(limiter);
      time("nowMs", nowMs);
      return db.transaction(() => viewOf(q, limiter, nowMs))();
    },

    async limiterNames() {
      return q.names.all().map((r) => r.limiter);
    },
  };
}

/** What judge needs (LR5: with no place of its own, every live waiter is older). */
function stateOf(q: Statements, at: At, own: { n: number; since_ms: number } | undefined) {
  const c = q.charges.get(at) ?? { requests: 0, input: 0, output: 0 };
  const block = q.limiter.get(at.l)?.blocked_until_ms ?? null;
  const place = own
    ? { since: own.since_ms, n: own.n }
    : { since: Number.MAX_SAFE_INTEGER, n: Number.MAX_SAFE_INTEGER };
  const state: LimiterState = {
    inWindow: { requests: c.requests, inputTokens: c.input, outputTokens: c.output },
    inFlight: q.inFlight.get(at)?.n ?? 0,
    blockedUntilMs: block !== null && block > at.now ? block : undefined,
    older: q.older.get({ ...at, ...place })?.n ?? 0,
  };
  return state;
}

function freeAtOf(q: Statements, at: At, excess: Excess): FreeAt {
  const need = (n: number | undefined) => n ?? null;
  const row = q.freeAt.get({
    ...at,
    r: need(excess.requests),
    i: need(excess.inputTokens),
    o: need(excess.outputTokens),
    t: need(excess.tokens),
  });
  const freeAt: FreeAt = {};
  if (row?.requests != null) freeAt.requests = row.requests;
  if (row?.input != null) freeAt.inputTokens = row.input;
  if (row?.output != null) freeAt.outputTokens = row.output;
  if (row?.tokens != null) freeAt.tokens = row.tokens;
  if (excess.concurrent !== undefined) {
    const end = q.holdEnd.get({ ...at, k: excess.concurrent - 1 });
    if (end) freeAt.concurrent = end.hold_until_ms;
  }
  return freeAt;
}

function viewOf(q: Statements, limiter: string, nowMs: number): LimiterView {
  const row = q.limiter.get(limiter);
  const at = { l: limiter, now: nowMs, from: nowMs - (row?.window_ms ?? 0) };
  const c = q.charges.get(at) ?? { requests: 0, input: 0, output: 0 };
  const view: LimiterView = {
    limiter,
    requests: c.requests,
    inputTokens: c.input,
    outputTokens: c.output,
    inFlight: q.inFlight.get(at)?.n ?? 0,
    waiting: q.waiting
      .all(limiter, nowMs)
      .map((w) => ({ id: w.id, executionId: w.execution_id, sinceMs: w.since_ms })),
  };
  const block = row?.blocked_until_ms ?? null;
  if (block !== null && block > nowMs) view.blockedUntilMs = block;
  return view;
}
