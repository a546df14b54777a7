/**
 * What every store answers to a rate limiter's `reserve` (spi-limiters.ts S30, S31), in one place
 * so that the three stores cannot drift apart. Each store gathers a limiter's state in its own
 * serialized step (memory: one synchronous run; SQLite: one IMMEDIATE transaction; PostgreSQL: one
 * transaction under the limiter's advisory lock) and asks these functions what to answer and
 * what to write.
 *
 * LR1. Input is checked before anything is read or written (`checkReserve`, `checkUse`,
 *      `checkLimiterName`): a limiter's name and an ask's ids are non-empty strings; times, the
 *      window, limits and amounts are safe integers, the window positive, the rest not negative.
 * LR2. A grant's charge: its requests as reserved; its input and output tokens as used once it is
 *      settled (more than reserved counts), as reserved before; `tokens` is their sum.
 * LR3. An ask that exceeds a limit on its own (more than a window's limit, or a `concurrent` of
 *      0) can never fit: it is refused with retryAtMs = nowMs + windowMs, and does not become a
 *      waiter, so it holds no place in front of asks that can fit.
 * LR4. retryAtMs is the latest of: nowMs + 1; the block's end; for each window dimension over
 *      its limit, the time the oldest grants whose charges free enough leave the window
 *      (their atMs + windowMs); for `concurrent`, the earlier of the hold's end that frees a slot
 *      and nowMs + LIMITER_STEP_MS (a settle may free one at any moment); with an older waiter in
 *      the way, nowMs + LIMITER_STEP_MS (it is granted when it asks again).
 * LR5. A waiter's place is (sinceMs, n), n the order its row was written: a live waiter that asks
 *      again keeps its place; one whose waitUntilMs has passed gets a new place at nowMs.
 *
 * For callers. The store wakes no one: a waiter asks again (at retryAtMs). Its waitUntilMs must
 * outlast the time it takes to come back, or it loses its place to younger asks each round (with
 * many waiters, none is granted for long stretches): retryAtMs plus some seconds is safe, and a
 * cancelled call withdraws. A live waiter that died holds the line until its waitUntilMs.
 * holdUntilMs is when the call would be given up (its timeout); a caller that crashed gives its
 * slot back then. Every process sharing a limiter must agree on its limit and roughly on the
 * clock: a grant is at its granter's nowMs, and a reserve prunes with its own window.
 */
import { InvalidInputError } from "../kernel/errors.ts";
import type { LimiterAsk, LimiterUse, RateLimit } from "./spi-limiters.ts";

/** How soon a waiter refused only by a possible settle or an older waiter asks again (LR4). */
export const LIMITER_STEP_MS = 25;

/** The dimensions a window limits. */
export const WINDOW_DIMENSIONS = ["requests", "inputTokens", "outputTokens", "tokens"] as const;
export type WindowDimension = (typeof WINDOW_DIMENSIONS)[number];

/** Charges in a window (LR2). */
export interface Charges {
  requests: number;
  inputTokens: number;
  outputTokens: number;
}

/** A limiter's state at nowMs, as seen by the ask: what a store gathers before it judges. */
export interface LimiterState {
  /** The charges of the grants in the window. */
  inWindow: Charges;
  /** Grants not settled whose hold has not ended. */
  inFlight: number;
  /** The block's end, when one is in force. */
  blockedUntilMs: number | undefined;
  /** Live waiters with a place older than the ask's (all live others when it has none). */
  older: number;
}

/** What must leave for the ask to fit: per window dimension the charge, and `concurrent` slots. */
export type Excess = Partial<Record<WindowDimension | "concurrent", number>>;

export type Verdict =
  | { granted: true }
  | { granted: false; alone: true }
  | { granted: false; alone: false; excess: Excess };

/**
 * The times that would free what is in excess: per window dimension the atMs of the grant whose
 * leaving frees enough (oldest first, by atMs then id), and for `concurrent` the hold end that frees
 * enough slots; undefined when the store found none.
 */
export type FreeAt = Partial<Record<WindowDimension | "concurrent", number>>;

export const chargeIn = (d: WindowDimension, c: Charges): number =>
  d === "tokens" ? c.inputTokens + c.outputTokens : c[d];

/** S30 with LR3: whether the ask is granted, and if not what is in its way. */
export function judge(limit: RateLimit, ask: LimiterAsk, state: LimiterState): Verdict {
  if (WINDOW_DIMENSIONS.some((d) => exceeds(limit[d], chargeIn(d, ask)))) {
    return { granted: false, alone: true };
  }
  if (limit.concurrent === 0) return { granted: false, alone: true };
  const excess: Excess = {};
  for (const d of WINDOW_DIMENSIONS) {
    const max = limit[d];
    if (max === undefined) continue;
    const over = chargeIn(d, state.inWindow) + chargeIn(d, ask) - max;
    if (over > 0) excess[d] = over;
  }
  if (limit.concurrent !== undefined && state.inFlight + 1 > limit.concurrent) {
    excess.concurrent = state.inFlight + 1 - limit.concurrent;
  }
  const fits = Object.keys(excess).length === 0;
  if (fits && state.blockedUntilMs === undefined && state.older === 0) return { granted: true };
  return { granted: false, alone: false, excess };
}

const exceeds = (max: number | undefined, charge: number) => max !== undefined && charge > max;

/** LR4: when a refused ask could fit if nothing else were granted. */
export function retryAtMs(
  limit: RateLimit,
  nowMs: number,
  verdict: Exclude<Verdict, { granted: true }>,
  state: LimiterState,
  freeAt: FreeAt,
): number {
  if (verdict.alone) return nowMs + limit.windowMs;
  const step = nowMs + LIMITER_STEP_MS;
  let at = Math.max(nowMs + 1, state.blockedUntilMs ?? 0);
  for (const d of WINDOW_DIMENSIONS) {
    if (verdict.excess[d] === undefined) continue;
    const leaves = freeAt[d];
    at = Math.max(at, leaves === undefined ? nowMs + limit.windowMs : leaves + limit.windowMs);
  }
  if (verdict.excess.concurrent !== undefined)
    at = Math.max(at, Math.min(freeAt.concurrent ?? step, step));
  if (state.older > 0) at = Math.max(at, step);
  return at;
}

/** LR1 for `reserve`. */
export function checkReserve(limiter: string, limit: RateLimit, ask: LimiterAsk, nowMs: number) {
  checkLimiterName(limiter);
  if (typeof ask !== "object" || ask === null) throw bad("reserve: ask must be an object");
  if (typeof limit !== "object" || limit === null) throw bad("reserve: limit must be an object");
  for (const field of ["id", "executionId"] as const) {
    if (typeof ask[field] !== "string" || ask[field] === "") {
      throw bad(`reserve: ask.${field} must be a non-empty string`, field);
    }
  }
  if (!(Number.isSafeInteger(limit.windowMs) && limit.windowMs > 0)) {
    throw bad(
      `reserve: limit.windowMs must be a positive integer, got ${limit.windowMs}`,
      "windowMs",
    );
  }
  for (const d of [...WINDOW_DIMENSIONS, "concurrent"] as const) {
    if (limit[d] !== undefined) amount(`limit.${d}`, limit[d]);
  }
  for (const f of ["requests", "inputTokens", "outputTokens"] as const) amount(`ask.${f}`, ask[f]);
  for (const f of ["holdUntilMs", "waitUntilMs"] as const) time(`ask.${f}`, ask[f]);
  time("nowMs", nowMs);
  if (ask.sentByMs !== undefined) {
    time("ask.sentByMs", ask.sentByMs);
    if (ask.sentByMs < nowMs)
      throw bad("reserve: ask.sentByMs must not be before nowMs", "sentByMs");
  }
}

/** LR1 for `settle`. */
export function checkUse(limiter: string, id: string, used: LimiterUse, nowMs: number): void {
  checkLimiterName(limiter);
  if (typeof id !== "string" || id === "") throw bad("settle: id must be a non-empty string", "id");
  if (typeof used !== "object" || used === null) throw bad("settle: used must be an object");
  amount("used.inputTokens", used.inputTokens);
  amount("used.outputTokens", used.outputTokens);
  time("nowMs", nowMs);
}

/** LR1: a limiter's name. */
export function checkLimiterName(limiter: string): void {
  if (typeof limiter !== "string" || limiter === "") {
    throw bad(`a limiter's name must be a non-empty string, got ${JSON.stringify(limiter)}`);
  }
}

/** LR1: a time in ms (blocks, views). */
export function time(what: string, value: number): void {
  if (!Number.isSafeInteger(value))
    throw bad(`${what} must be an integer (ms), got ${value}`, what);
}

function amount(what: string, value: number | undefined): void {
  if (!(Number.isSafeInteger(value) && (value ?? -1) >= 0)) {
    throw bad(`${what} must be a non-negative integer, got ${value}`, what);
  }
}

const bad = (message: string, field?: string) =>
  new InvalidInputError(message, field === undefined ? undefined : { field });
