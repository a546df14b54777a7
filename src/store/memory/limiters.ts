/**
 * Rate limiters (spi-limiters.ts S30..S34) in the memory store. A reserve runs from its first
 * read to its last write without awaiting anything, so it is one step no other call on the data
 * (any handle's) interleaves with; the answer is ../limiter-rules.ts's, as in the SQL stores.
 * Grants and waiters are kept per limiter by id; a waiter's `n` is the data's counter (LR5).
 */
import {
  chargeIn,
  checkLimiterName,
  checkReserve,
  checkUse,
  judge,
  retryAtMs,
  time,
  WINDOW_DIMENSIONS,
  type FreeAt,
  type LimiterState,
} from "../limiter-rules.ts";
import { compareKeyIds } from "../key-range.ts";
import type { LimiterAsk, LimiterStore, LimiterView, RateLimit } from "../spi-limiters.ts";
import { live, type Handle } from "./data.ts";
import type { Grant, LimiterRows, Waiter } from "./limiter-rows.ts";

const byPlace = (a: Waiter, b: Waiter) => a.sinceMs - b.sinceMs || a.n - b.n;

export function memoryLimiters(h: Handle): LimiterStore {
  const data = h.data.limiters;
  const rowsOf = (limiter: string): LimiterRows => {
    let rows = data.byName.get(limiter);
    if (!rows) data.byName.set(limiter, (rows = { grants: new Map(), waiters: new Map() }));
    return rows;
  };

  return {
    async reserve(limiter, limit, ask, nowMs) {
      live(h);
      checkReserve(limiter, limit, ask, nowMs);
      const rows = rowsOf(limiter);
      rows.windowMs = limit.windowMs;
      prune(rows, limit.windowMs, nowMs);
      if (rows.grants.has(ask.id)) return { granted: true };
      const own = rows.waiters.get(ask.id);
      const state = stateOf(rows, limit.windowMs, nowMs, own);
      const verdict = judge(limit, ask, state);
      if (verdict.granted) {
        rows.waiters.delete(ask.id);
        rows.grants.set(ask.id, grantOf(ask, ask.sentByMs ?? nowMs));
        return { granted: true };
      }
      if (!verdict.alone) {
        if (own) own.waitUntilMs = ask.waitUntilMs;
        else rows.waiters.set(ask.id, waiterOf(ask, nowMs, data.nextWaiter++));
      }
      const freeAt = verdict.alone ? {} : freeAtOf(rows, limit, nowMs, verdict.excess);
      return {
        granted: false,
        retryAtMs: retryAtMs(limit, nowMs, verdict, state, freeAt),
        position: state.older,
      };
    },

    async settle(limiter, id, used, nowMs) {
      live(h);
      checkUse(limiter, id, used, nowMs);
      const grant = data.byName.get(limiter)?.grants.get(id);
      if (!grant || grant.settled) return;
      grant.inputTokens = used.inputTokens;
      grant.outputTokens = used.outputTokens;
      grant.settled = true;
      grant.atMs = Math.min(grant.atMs, nowMs);
    },

    async withdraw(limiter, id) {
      live(h);
      checkLimiterName(limiter);
      data.byName.get(limiter)?.waiters.delete(id);
    },

    async blockLimiter(limiter, untilMs) {
      live(h);
      checkLimiterName(limiter);
      time("untilMs", untilMs);
      const rows = rowsOf(limiter);
      rows.blockedUntilMs = Math.max(rows.blockedUntilMs ?? untilMs, untilMs);
    },

    async limiterView(limiter, nowMs) {
      live(h);
      checkLimiterName(limiter);
      time("nowMs", nowMs);
      return viewOf(limiter, data.byName.get(limiter), nowMs);
    },

    async limiterNames() {
      live(h);
      return [...data.byName]
        .filter(([, rows]) => rows.grants.size > 0 || rows.waiters.size > 0)
        .map(([name]) => name)
        .sort(compareKeyIds);
    },
  };
}

/** S34: settled grants out of the window and grants whose hold ended out of it; expired waiters. */
function prune(rows: LimiterRows, windowMs: number, nowMs: number): void {
  for (const [id, g] of rows.grants) {
    if (g.atMs <= nowMs - windowMs && (g.settled || g.holdUntilMs <= nowMs)) rows.grants.delete(id);
  }
  for (const [id, w] of rows.waiters) if (w.waitUntilMs <= nowMs) rows.waiters.delete(id);
}

function stateOf(
  rows: LimiterRows,
  windowMs: number,
  nowMs: number,
  own: Waiter | undefined,
): LimiterState {
  const inWindow = { requests: 0, inputTokens: 0, outputTokens: 0 };
  let inFlight = 0;
  for (const g of rows.grants.values()) {
    if (g.atMs > nowMs - windowMs) {
      inWindow.requests += g.requests;
      inWindow.inputTokens += g.inputTokens;
      inWindow.outputTokens += g.outputTokens;
    }
    if (!g.settled && g.holdUntilMs > nowMs) inFlight++;
  }
  let older = 0;
  for (const w of rows.waiters.values()) {
    if (w !== own && w.waitUntilMs > nowMs && (!own || byPlace(w, own) < 0)) older++;
  }
  const block = rows.blockedUntilMs;
  return {
    inWindow,
    inFlight,
    blockedUntilMs: block !== undefined && block > nowMs ? block : undefined,
    older,
  };
}

/** LR4's inputs: the grant whose leaving frees each excess, and the hold end freeing the slots. */
function freeAtOf(
  rows: LimiterRows,
  limit: RateLimit,
  nowMs: number,
  excess: Partial<Record<string, number>>,
): FreeAt {
  const freeAt: FreeAt = {};
  const inWindow = [...rows.grants.values()]
    .filter((g) => g.atMs > nowMs - limit.windowMs)
    .sort((a, b) => a.atMs - b.atMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (const d of WINDOW_DIMENSIONS) {
    const need = excess[d];
    if (need === undefined) continue;
    let freed = 0;
    freeAt[d] = inWindow.find((g) => (freed += chargeIn(d, g)) >= need)?.atMs;
  }
  const slots = excess.concurrent;
  if (slots !== undefined) {
    const ends = [...rows.grants.values()]
      .filter((g) => !g.settled && g.holdUntilMs > nowMs)
      .map((g) => g.holdUntilMs)
      .sort((a, b) => a - b);
    freeAt.concurrent = ends[slots - 1];
  }
  return freeAt;
}

function viewOf(limiter: string, rows: LimiterRows | undefined, nowMs: number): LimiterView {
  const view: LimiterView = {
    limiter,
    requests: 0,
    inputTokens: 0,
    outputTokens: 0,
    inFlight: 0,
    waiting: [],
  };
  if (!rows) return view;
  const state = stateOf(rows, rows.windowMs ?? 0, nowMs, undefined);
  Object.assign(view, state.inWindow, { inFlight: state.inFlight });
  if (state.blockedUntilMs !== undefined) view.blockedUntilMs = state.blockedUntilMs;
  view.waiting = [...rows.waiters.values()]
    .filter((w) => w.waitUntilMs > nowMs)
    .sort(byPlace)
    .map(({ id, executionId, sinceMs }) => ({ id, executionId, sinceMs }));
  return view;
}

const grantOf = (ask: LimiterAsk, atMs: number): Grant => ({
  id: ask.id,
  atMs,
  requests: ask.requests,
  inputTokens: ask.inputTokens,
  outputTokens: ask.outputTokens,
  holdUntilMs: ask.holdUntilMs,
  settled: false,
});

const waiterOf = (ask: LimiterAsk, nowMs: number, n: number): Waiter => ({
  id: ask.id,
  executionId: ask.executionId,
  sinceMs: nowMs,
  waitUntilMs: ask.waitUntilMs,
  n,
});
