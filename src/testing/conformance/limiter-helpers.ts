/**
 * What the rate-limiter suites (limiters.ts, limiters-waiters.ts) share: asks, limits, and a
 * reserve that expects a grant or a refusal.
 */
import { expect } from "./vitest.ts";
import type { LimiterAsk, RateLimit, Store } from "../../store/spi.ts";
import { T0 } from "./helpers.ts";

export const WINDOW_MS = 1_000;
/** Far after every time a test uses: a hold or a wait that does not end on its own. */
export const LATER = T0 + 1_000_000;

/** An ask of one request and no tokens, held and waiting until LATER unless `fields` say. */
export function ask(id: string, fields: Partial<LimiterAsk> = {}): LimiterAsk {
  return {
    id,
    executionId: `e-${id}`,
    requests: 1,
    inputTokens: 0,
    outputTokens: 0,
    holdUntilMs: LATER,
    waitUntilMs: LATER,
    ...fields,
  };
}

export const limitOf = (fields: Omit<RateLimit, "windowMs">): RateLimit => ({
  windowMs: WINDOW_MS,
  ...fields,
});

/** Reserves and expects a grant. */
export async function granted(store: Store, limit: RateLimit, a: LimiterAsk, nowMs: number) {
  expect(await store.reserve("L", limit, a, nowMs), `${a.id} at ${nowMs}`).toEqual({
    granted: true,
  });
}

/** Reserves and expects a refusal with this retry time and position. */
export async function refused(
  store: Store,
  limit: RateLimit,
  a: LimiterAsk,
  nowMs: number,
  retryAtMs: number,
  position = 0,
) {
  expect(await store.reserve("L", limit, a, nowMs), `${a.id} at ${nowMs}`).toEqual({
    granted: false,
    retryAtMs,
    position,
  });
}
