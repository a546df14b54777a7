/**
 * Rate limiters (issue 26): named windows of requests and tokens that calls to a provider
 * reserve before they run, shared by every process on the store, so a fleet together stays
 * under a provider's limits (requests, input and output tokens per minute, concurrent calls).
 *
 * Terms. A grant is a reservation the store accepted; its time `atMs` is the ask's `sentByMs` (the
 * caller's nowMs when it gives none), and a settle at an earlier time moves it there. Its charge
 * in a dimension is what it reserved until it is settled, then what it used. It counts in the
 * window at time t while `atMs > t - windowMs`, and toward `concurrent` while it is not settled
 * and `holdUntilMs > t` (a caller that crashed mid-call gives its slot back then). A waiter is an
 * ask that was refused: its place is the time of its first refused ask, kept while it asks again
 * before its `waitUntilMs`.
 *
 * Contract (the conformance suite checks S30..S34):
 * S30. `reserve` grants an ask only if, at nowMs, for each dimension the limit names, the charges
 *      of the grants in the window plus the ask's are at most the limit; the unsettled grants
 *      plus one are at most `concurrent`; no block is in force (S33); and no live waiter of the
 *      limiter holds an older place (first come, first served across the fleet). Concurrent
 *      reservers (other processes included) never together pass a limit. A granted ask that is
 *      asked again (the same id) is granted again without a second charge.
 * S31. A refused ask becomes (or stays) a waiter; the answer says its position (live waiters with
 *      an older place) and `retryAtMs`, the earliest time at which it could fit if nothing else
 *      were granted (grants leaving the window or settling, a block ending; nowMs + 1 at least).
 * S32. `settle` makes a grant's charge what it used, ends its hold on `concurrent` and moves its
 *      `atMs` to the settle's nowMs when that is earlier (the call reached the provider by then); settling
 *      an id that is not granted does nothing. `withdraw` removes a waiter (a cancelled call).
 * S33. `blockLimiter(name, untilMs)` grants nothing on that limiter before `untilMs` (a provider's
 *      429 with a retry-after); blocks keep the latest time.
 * S34. Grants out of the window and settled, and waiters past their `waitUntilMs`, are removed
 *      as reserve goes: what a limiter keeps is bounded by what one window holds.
 */

/** A limiter's limits per window; every process sharing the store must agree on them. */
export interface RateLimit {
  /** The window (60 000 for "per minute"). */
  windowMs: number;
  requests?: number;
  inputTokens?: number;
  outputTokens?: number;
  /** Input and output together. */
  tokens?: number;
  /** Calls in flight at once. */
  concurrent?: number;
}

export interface LimiterAsk {
  /** Unique per call attempt (its step's call id and attempt). */
  id: string;
  executionId: string;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  /** A grant counts toward `concurrent` until settled or this time. */
  holdUntilMs: number;
  /**
   * The latest time the call reaches the provider (default nowMs): its grant is counted in the
   * windows as if made then, until a settle at an earlier time says it was made by then (S32). A
   * provider counts a request when it arrives, which may be after the grant.
   */
  sentByMs?: number;
  /** A waiter keeps its place until this time unless it asks again before. */
  waitUntilMs: number;
}

export type LimiterAnswer =
  { granted: true } | { granted: false; retryAtMs: number; position: number };

export interface LimiterUse {
  inputTokens: number;
  outputTokens: number;
}

export interface LimiterWaiter {
  id: string;
  executionId: string;
  sinceMs: number;
}

export interface LimiterView {
  limiter: string;
  /** Charges in the window at nowMs, per dimension. */
  requests: number;
  inputTokens: number;
  outputTokens: number;
  inFlight: number;
  blockedUntilMs?: number;
  /** Live waiters, oldest place first. */
  waiting: LimiterWaiter[];
}

export interface LimiterStore {
  /** S30, S31 */
  reserve(
    limiter: string,
    limit: RateLimit,
    ask: LimiterAsk,
    nowMs: number,
  ): Promise<LimiterAnswer>;
  /** S32 */
  settle(limiter: string, id: string, used: LimiterUse, nowMs: number): Promise<void>;
  /** S32 */
  withdraw(limiter: string, id: string): Promise<void>;
  /** S33 */
  blockLimiter(limiter: string, untilMs: number): Promise<void>;
  limiterView(limiter: string, nowMs: number): Promise<LimiterView>;
  /** The limiters with a grant in a window or a waiter. */
  limiterNames(): Promise<string[]>;
}
