/**
 * The memory store's rate-limiter rows (S30..S34, limiters.ts), declared apart so that the data
 * (data.ts) and the code over it (limiters.ts) import them without a circle.
 */
import type { Charges } from "../limiter-rules.ts";

export interface Grant extends Charges {
  id: string;
  atMs: number;
  holdUntilMs: number;
  settled: boolean;
}

export interface Waiter {
  id: string;
  executionId: string;
  sinceMs: number;
  waitUntilMs: number;
  n: number;
}

/** One limiter's rows: its last window (for views), its block, its grants and waiters. */
export interface LimiterRows {
  windowMs?: number;
  blockedUntilMs?: number;
  grants: Map<string, Grant>;
  waiters: Map<string, Waiter>;
}

/** The limiters of a store's data, and the counter that orders waiters (LR5). */
export interface LimiterData {
  byName: Map<string, LimiterRows>;
  nextWaiter: number;
}

export const newLimiterData = (): LimiterData => ({ byName: new Map(), nextWaiter: 1 });
