/**
 * Retry (DESIGN, ADR 0020 A3): an effect that fails is attempted again after an exponential
 * backoff, up to a maximum number of attempts.
 *
 * - Every failed attempt is a fact: `STEP_FAILED { retrying: true, attempt, retryInMs }`, written
 *   (with what the attempt metered) before the backoff starts, and every new attempt writes
 *   `STEP_STARTED`. The attempt count is the fold's, so a crash during a backoff does not reset it.
 * - The jitter is seeded by the step's idempotency key and the attempt number, so the same attempt
 *   of the same step always waits the same time, and the time it waited is in its fact.
 * - An abort is never retried, whatever `isRetryable` says: the signal is checked before
 *   `isRetryable` is asked, and the backoff wait ends the moment the signal aborts. Otherwise a
 *   cancel would be a no-op for an effect the application marked retryable.
 * - The middleware sits outside budget admission and metering (defaultMiddleware), so every
 *   attempt is admitted against what the earlier ones spent and is metered on its own.
 */
import { InvalidInputError, isLoomError, RetryableError } from "../kernel/errors.ts";
import { rerunning } from "./compose.ts";
import { abortableDelay } from "./delay.ts";
import type { EffectMiddleware, MiddlewareContext, RetryPolicy } from "./effect.ts";

export type { RetryPolicy } from "./effect.ts";

type Resolved = Required<RetryPolicy>;

const DEFAULTS: Resolved = {
  maxAttempts: 3,
  initialDelayMs: 250,
  backoffFactor: 2,
  maxDelayMs: 10_000,
  jitter: 0.5,
  isRetryable: (error) => defaultIsRetryable(error),
};

/**
 * Retries what is likely transient: a `RetryableError`, and any error that is not Loom's own
 * refusal, a `TerminalError`, an `AbortError`, or an HTTP client error (a 4xx `status` other than
 * 408, 409 and 429, as the provider SDKs' errors carry it).
 */
export function defaultIsRetryable(error: unknown): boolean {
  if (error instanceof RetryableError || isLoomError(error, "LOOM_RETRYABLE")) return true;
  if (isLoomError(error) && !isLoomError(error, "LOOM_APPLICATION")) return false;
  if (error instanceof Error && error.name === "AbortError") return false;
  const status = statusOf(error);
  if (typeof status === "number" && status >= 400 && status < 500) {
    return status === 408 || status === 409 || status === 429;
  }
  return true;
}

/** An HTTP status on the error, or in its recorded details (an error read back from a child). */
function statusOf(error: unknown): unknown {
  if (error === null || typeof error !== "object") return undefined;
  const own: unknown = Reflect.get(error, "status");
  if (own !== undefined) return own;
  const details: unknown = Reflect.get(error, "details");
  return details !== null && typeof details === "object"
    ? (Reflect.get(details, "status") as unknown)
    : undefined;
}

/**
 * Checks a policy before anything is recorded; `owner` names it in the error. Returns a frozen
 * copy with only the fields that are set, so an `undefined` field keeps its default and a later
 * change to the caller's object cannot bypass the check.
 */
export function checkedRetryPolicy(value: unknown, owner: string): RetryPolicy | false {
  if (value === false) return false;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidInputError(`the retry policy of ${owner} must be an object or false`);
  }
  const policy = value as Record<string, unknown>;
  const number = (key: string, ok: (n: number) => boolean, what: string) => {
    const v = policy[key];
    if (v === undefined) return;
    if (typeof v !== "number" || !Number.isFinite(v) || !ok(v)) {
      throw new InvalidInputError(
        `retry ${key} of ${owner} must be ${what}, got ${typeof v === "number" ? v : (JSON.stringify(v) ?? typeof v)}`,
      );
    }
  };
  number("maxAttempts", (n) => Number.isInteger(n) && n >= 1, "an integer >= 1");
  number("initialDelayMs", (n) => n >= 0, "a number >= 0");
  number("backoffFactor", (n) => n >= 1, "a number >= 1");
  number("maxDelayMs", (n) => n >= 0, "a number >= 0");
  number("jitter", (n) => n >= 0 && n <= 1, "a number from 0 to 1");
  if (policy.isRetryable !== undefined && typeof policy.isRetryable !== "function") {
    throw new InvalidInputError(`retry isRetryable of ${owner} must be a function`);
  }
  const copy: Record<string, unknown> = {};
  for (const key of KEYS) if (policy[key] !== undefined) copy[key] = policy[key];
  return Object.freeze(copy);
}

const KEYS = [
  "maxAttempts",
  "initialDelayMs",
  "backoffFactor",
  "maxDelayMs",
  "jitter",
  "isRetryable",
] as const satisfies readonly (keyof RetryPolicy)[];

export function retryMiddleware(policy: RetryPolicy = {}): EffectMiddleware {
  const base = checkedRetryPolicy(policy, "retryMiddleware");
  const defaults: Resolved = { ...DEFAULTS, ...(base || {}) };
  return rerunning<MiddlewareContext>(async (ctx, next) => {
    // Options reach here checked (checkedExecuteOptions): set fields only, frozen.
    const own = ctx.options.retry;
    if (own === false) return next();
    const p: Resolved = own ? { ...defaults, ...own } : defaults;
    for (;;) {
      try {
        return await next();
      } catch (error) {
        // A3: an abort ends the step, whatever the error or the policy says.
        if (ctx.signal.aborted) throw error;
        if (ctx.attempt >= p.maxAttempts || !retryable(p, error, ctx)) throw error;
        const waitMs = backoffMs(p, ctx.idempotencyKey, ctx.attempt, error);
        await ctx.failedAttempt(error, waitMs);
        await abortableDelay(waitMs, ctx.signal);
        await ctx.beginAttempt();
      }
    }
  });
}

/** A predicate that throws is a bug in it, not a reason to retry: the effect's error stands. */
function retryable(p: Resolved, error: unknown, ctx: MiddlewareContext): boolean {
  try {
    return p.isRetryable(error, ctx) === true;
  } catch {
    return false;
  }
}

/** The wait after a failed `attempt`: exponential, capped, with seeded jitter. */
export function backoffMs(p: Resolved, key: string, attempt: number, error: unknown): number {
  const exponential = p.initialDelayMs * p.backoffFactor ** (attempt - 1);
  const capped = Math.min(p.maxDelayMs, exponential);
  const jittered = capped * (1 - p.jitter * unitHash(`${key}#${attempt}`));
  const after = error instanceof RetryableError ? (error.retryAfterMs ?? 0) : 0;
  return Math.round(Math.max(jittered, after));
}

/** A number in [0, 1) from a string (FNV-1a), the same on every machine. */
function unitHash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) / 2 ** 32;
}
