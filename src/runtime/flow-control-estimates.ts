/**
 * How long a waiting execution may still wait (issue 26 item 4): estimates the flow-control
 * views (verbs-flow-control.ts) show beside each waiter. Pure: the views hand in what the store
 * answered and the runtime clock's nowMs. An estimate is a number only where the data decides it;
 * otherwise it is undefined ("-" in `loom ls`), never a made-up number.
 *
 * Invariants (tests cite FE1..FE4):
 * FE1. Queue. For the waiter at position p (1-based, admission order), with the queue's
 *      `concurrency` C, `active` A and H the mean slot-hold time (admission to end) of recently
 *      ended executions of the queue: the queue needs p - max(0, C - A) slots freed before it;
 *      n > 0 slots free in about n * H / C (C slots, each freed every H on average). With a
 *      `keyConcurrency` K and a key k: the waiters before it of key k plus one, less K's free
 *      slots for k, must be freed, in about n_k * H / K. A debounce's `notBeforeMs` bounds it
 *      below. The estimate is the largest of these; 0 means it fits now and waits only for an
 *      admission pass (a runtime that has its flow).
 * FE2. Queue, unknowable: the limits are unknown to this runtime (it was given no `queues`), or
 *      a slot must be freed and no ended execution of the queue tells H.
 * FE3. Limiter. For the waiter at position p with the limit L_d of each window dimension d, its
 *      window W and the window's charges c_d over its `requests` r: the p asks up to it are taken
 *      to ask the window's mean a_d = c_d / r each (1 for requests), and the window to refill at
 *      L_d per W (its grants leave it evenly): it waits (c_d + p * a_d - L_d) * W / L_d for the
 *      dimension most in excess, and at least until a block's end. 0 when nothing is in excess.
 * FE4. Limiter, unknowable: the limit is unknown to this runtime (it was given no `rateLimits`),
 *      or `concurrent` is full (a slot frees when a call ends, which no view tells).
 */
import type { LimiterView, QueueLimits, QueueView, RateLimit } from "../store/spi.ts";

/** FE1, FE2: each shown waiter's expected wait, in `view.waiting`'s order. */
export function queueWaits(
  view: QueueView,
  limits: QueueLimits | undefined,
  meanHoldMs: number | undefined,
  nowMs: number,
): (number | undefined)[] {
  if (limits === undefined) return view.waiting.map(() => undefined);
  const { concurrency, keyConcurrency } = limits;
  const seenOfKey = new Map<string, number>();
  return view.waiting.map((w, i) => {
    const position = i + 1;
    const parts: (number | undefined)[] = [Math.max(0, (w.notBeforeMs ?? nowMs) - nowMs)];
    if (concurrency !== undefined) {
      const need = position - Math.max(0, concurrency - view.active);
      parts.push(slotsIn(need, concurrency, meanHoldMs));
    }
    if (keyConcurrency !== undefined && w.key !== undefined) {
      const before = seenOfKey.get(w.key) ?? 0;
      seenOfKey.set(w.key, before + 1);
      const active = view.activeByKey[w.key] ?? 0;
      const need = before + 1 - Math.max(0, keyConcurrency - active);
      parts.push(slotsIn(need, keyConcurrency, meanHoldMs));
    }
    return largest(parts);
  });
}

/** FE1: how long `need` slots of `slots` take to free; FE2 when it needs one and H is unknown. */
function slotsIn(need: number, slots: number, meanHoldMs: number | undefined): number | undefined {
  if (need <= 0) return 0;
  if (meanHoldMs === undefined) return undefined;
  return Math.round((need * meanHoldMs) / slots);
}

const largest = (parts: readonly (number | undefined)[]): number | undefined =>
  parts.some((p) => p === undefined) ? undefined : Math.max(0, ...(parts as number[]));

/** FE1: the mean of the hold times sampled, or undefined when none was. */
export function meanOf(samples: readonly number[]): number | undefined {
  if (samples.length === 0) return undefined;
  return Math.round(samples.reduce((a, b) => a + b, 0) / samples.length);
}

/** FE3, FE4: the expected wait of the waiter at `position` (1-based) of `view`. */
export function limiterWait(
  view: LimiterView,
  limit: RateLimit | undefined,
  position: number,
  nowMs: number,
): number | undefined {
  if (limit === undefined) return undefined;
  if (limit.concurrent !== undefined && view.inFlight >= limit.concurrent) return undefined;
  const blocked = Math.max(0, (view.blockedUntilMs ?? nowMs) - nowMs);
  const r = view.requests;
  const charges = {
    requests: r,
    inputTokens: view.inputTokens,
    outputTokens: view.outputTokens,
    tokens: view.inputTokens + view.outputTokens,
  };
  let refill = 0;
  for (const d of ["requests", "inputTokens", "outputTokens", "tokens"] as const) {
    const max = limit[d];
    if (max === undefined || max <= 0) continue;
    const mean = d === "requests" ? 1 : r > 0 ? charges[d] / r : 0;
    const excess = charges[d] + position * mean - max;
    if (excess > 0) refill = Math.max(refill, (excess * limit.windowMs) / max);
  }
  return Math.round(Math.max(blocked, refill));
}
