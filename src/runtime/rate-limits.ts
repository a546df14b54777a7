/**
 * Rate limits on effects (issue 26 item 2): a call whose effect names a limiter (an LLM effect
 * names `<provider>:<model>`) reserves what it may send and take in that limiter's window before
 * it runs, through the store (spi-limiters.ts S30..S34), so every process sharing the store stays
 * under the provider's limits together.
 *
 * Invariants (tests cite RL1..RL7):
 * RL1. A call reserves before its effect runs, once per attempt (the retry middleware is outside
 *      this one); a call whose limiter the runtime's `rateLimits` does not name is not limited.
 * RL2. Refused, it waits in the store's line (S31, first come first served across the fleet),
 *      asking again at the time the store says it could fit (later by 20 ms for each waiter before
 *      it), and at least every second, which keeps its place. The wait ends with the step's signal (a cancel, a deadline, the runtime
 *      closing): the place is withdrawn and the call never runs, however the signal lands (while
 *      it sleeps or while it asks; a grant that comes back after it is settled with no tokens).
 *      (A signal that landed while an ask was in flight left the place in the store's line, where
 *      it held back every later call of the fleet for up to three seconds.)
 * RL3. A call that could never fit (it alone asks more than a limit) is refused before it waits,
 *      with InvalidInputError naming the limit.
 * RL4. After the call, its reservation is settled (S32): an answered call with what it was metered
 *      (fewer tokens than it reserved give the rest back to the window); a call the provider
 *      refused (429) with nothing; any other end (aborted mid-stream, failed) with at least what
 *      it reserved, which the provider may have counted when the request arrived. A settle the
 *      store fails is asked again after SETTLE_RETRY_MS (a settle of a settled id does nothing,
 *      S32) before the failure is reported: an unsettled grant holds its `concurrent` slot until
 *      its hold ends, ten minutes for a step with no timeout. (One lost settle held a limiter of
 *      `concurrent: 1` shut for the whole fleet that long.)
 * RL5. A provider's 429 (an error with `status` 429) blocks the limiter for the whole fleet
 *      (S33) until its retry-after (`retry-after-ms`, `retry-after` in seconds or as a date, or
 *      OpenAI's `x-ratelimit-reset-*` durations, Anthropic's reset times), else for one second;
 *      the error goes on to the retry middleware. The time is read by retry-hints.ts (RH1: whole
 *      milliseconds, at most a day).
 * RL6. `rateLimits` is checked when the runtime is made (InvalidInputError); every process
 *      sharing the store must pass the same. A limiter's name is text every store keeps as it
 *      is: no NUL, no lone surrogate. (On PostgreSQL a name with NUL failed every reserve, which
 *      RL11 took for a store's failure: its calls' runs stopped at every recovery.)
 * RL7. The wait is marked on the step's span (`loom.limiter.*` attributes): which limiter, how
 *      long it waited, its place when it first waited.
 * RL9. Each call made reserves under an id of its own: two processes that both run one recorded
 *      attempt (a lease taken over before the attempt's start was written) make two requests, and
 *      both are charged. (An id per recorded attempt let the second request pass as the first's,
 *      granted again without a charge: seen as 429s under load.)
 * RL10. The calls of one process waiting on one limiter wait in a line of the process's own
 *      (limiter-line.ts): only its first asks the store, the next once that one is granted or
 *      gone. Each waiting call asking the store on its own (one process held 60 places) crowded
 *      the store's connections and lock, and a window took seconds to refill.
 * RL8. A grant counts in the windows as made when the call reaches the provider, which a provider
 *      counts it by and which comes after the grant: the call's end, or SENT_WITHIN_MS after the
 *      grant when it ends later or never (a crash) (store S30, S32: `sentByMs`, moved back by the
 *      settle). A grant counted at its own time let a window the provider counts hold what the
 *      limiter had already let go of, when requests reached it late (a loaded process).
 * RL11. A store that fails a reservation (a crash, a transient failure, a lost reply) stops the
 *      execution's run, as a failed append does (run.ts R5): the attempt is not recorded as
 *      failed, and recovery drives the step again. A store's failure is never the step's outcome
 *      (the simulator's SIM10 found a lost reply of `reserve` recorded as STEP_FAILED).
 * RL12. A claim on a limiter `rateLimits` names is checked before the call reserves, as RL3's
 *      refusal is: token counts that are not non-negative safe integers are InvalidInputError.
 *      (A fractional or NaN count, or a maxTokens past 2^53 under a limiter with no token limit,
 *      reached the store, whose refusal RL11 took for a store's failure: the run stopped, and
 *      stopped again at every recovery.) The times an ask sends are safe integers whatever the
 *      step's timeout (a fractional `timeoutMs: 1500.5`, or 1e300, did the same).
 */
import type { EffectMiddleware, LimiterClaim, MiddlewareContext } from "../effects/effect.ts";
import type { Effect } from "../effects/effect.ts";
import { InvalidInputError } from "../kernel/errors.ts";
import type { LimiterAnswer, LimiterStore, LimiterUse, RateLimit } from "../store/spi.ts";
import { delay, randomIds } from "./system.ts";
import { LimiterLine } from "./limiter-line.ts";
import { rateLimitedFor } from "./retry-hints.ts";

export { MAX_BLOCK_MS, rateLimitedFor } from "./retry-hints.ts";

/** A limiter as `rateLimits` names it: per minute unless `windowMs` says otherwise. */
export interface RateLimitOptions {
  /** Requests per window. */
  rpm?: number;
  /** Input tokens per window. */
  inputTpm?: number;
  /** Output tokens per window. */
  outputTpm?: number;
  /** Input and output tokens together per window. */
  tpm?: number;
  /** Calls in flight at once. */
  concurrent?: number;
  /** The window (default 60 000 ms: "per minute"). */
  windowMs?: number;
}

const KNOWN = ["rpm", "inputTpm", "outputTpm", "tpm", "concurrent", "windowMs"] as const;
/** How long a granted call holds a `concurrent` slot at most when its step has no timeout. */
const HOLD_MS = 10 * 60_000;
/** The longest a waiter sleeps before it asks again (its place is kept for three of these). */
const MAX_SLEEP_MS = 1000;
/** How much longer a waiter sleeps for each waiter in line before it (RL2). */
const BEHIND_MS = 20;
/** RL4: the waits before a failed settle is asked again. */
const SETTLE_RETRY_MS = [100, 1000];
/** RL8: a request not on its way this long after its grant is taken to have arrived by then. */
export const SENT_WITHIN_MS = 5000;

/** RL6: text a SQL store keeps as it is (PostgreSQL refuses NUL; UTF-8 has no lone surrogate). */
const TEXT = /^[^\0\p{Cs}]*$/u;

/** RL6 */
export function checkedRateLimits(
  value: Record<string, RateLimitOptions> | undefined,
): Readonly<Record<string, RateLimit>> {
  if (value === undefined) return {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidInputError("rateLimits must be an object of limiter name -> limits");
  }
  const out: Record<string, RateLimit> = {};
  for (const [name, given] of Object.entries(value)) {
    if (name.length === 0 || name.length > 200 || !TEXT.test(name)) {
      throw new InvalidInputError(
        `a rate limiter's name must be 1 to 200 characters of well-formed Unicode without NUL, got ${JSON.stringify(name)}`,
      );
    }
    if (given === null || typeof given !== "object" || Array.isArray(given)) {
      throw new InvalidInputError(`rate limiter "${name}" must be an object`);
    }
    const unknown = Object.keys(given).filter((k) => !(KNOWN as readonly string[]).includes(k));
    if (unknown.length > 0) {
      throw new InvalidInputError(
        `rate limiter "${name}" has unknown keys ${unknown.join(", ")} (known: ${KNOWN.join(", ")})`,
      );
    }
    const n = (v: number | undefined, what: string) =>
      v === undefined ? undefined : whole(v, `rate limiter "${name}" ${what}`);
    const limit: RateLimit = { windowMs: n(given.windowMs, "windowMs") ?? 60_000 };
    const pairs = [
      ["requests", n(given.rpm, "rpm")],
      ["inputTokens", n(given.inputTpm, "inputTpm")],
      ["outputTokens", n(given.outputTpm, "outputTpm")],
      ["tokens", n(given.tpm, "tpm")],
      ["concurrent", n(given.concurrent, "concurrent")],
    ] as const;
    for (const [key, v] of pairs) if (v !== undefined) limit[key] = v;
    if (pairs.every(([, v]) => v === undefined)) {
      throw new InvalidInputError(`rate limiter "${name}" limits nothing`);
    }
    out[name] = Object.freeze(limit);
  }
  return Object.freeze(out);
}

/** The limiter a call reserves with: the call's option over the effect's own (RL1). */
export function limiterClaimOf<I>(
  effect: Effect<I, unknown>,
  input: I,
  option: string | false | undefined,
): LimiterClaim | undefined {
  if (option === false) return undefined;
  let own: LimiterClaim | undefined;
  try {
    own = effect.limiter?.(input);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new InvalidInputError(`effect "${effect.name}" limiter threw: ${why}`);
  }
  if (option === undefined) return own;
  return { name: option, inputTokens: own?.inputTokens ?? 0, outputTokens: own?.outputTokens ?? 0 };
}

export interface RateLimitDeps {
  store: LimiterStore;
  limits: Readonly<Record<string, RateLimit>>;
  now(): number;
  report: (error: unknown) => void;
  /** RL11: stops the run of an execution (its step then halts, unrecorded). */
  stop: (executionId: string, error: Error) => void;
}

/** RL1: the runtime's innermost middleware when `rateLimits` names a limiter, else none. */
export function rateLimiting(
  limits: Readonly<Record<string, RateLimit>>,
  deps: Omit<RateLimitDeps, "limits">,
): EffectMiddleware[] {
  return Object.keys(limits).length === 0 ? [] : [rateLimitMiddleware({ ...deps, limits })];
}

/** RL1..RL5, RL7: the runtime's innermost middleware, where `rateLimits` names limiters. */
export function rateLimitMiddleware(deps: RateLimitDeps): EffectMiddleware {
  // RL10: this process's calls wait on each limiter in a line of its own.
  const lines = new Map<string, LimiterLine>();
  return async (ctx, next) => {
    const claim = ctx.limiter;
    const limit = claim === undefined ? undefined : deps.limits[claim.name];
    if (claim === undefined || limit === undefined) return next();
    refuseNeverFits(claim, limit, ctx.effect);
    // RL9: one id per call made, never per recorded attempt.
    const id = `${ctx.executionId}/${ctx.stepId}/${ctx.attempt}/${randomIds.newId()}`;
    let line = lines.get(claim.name);
    if (!line) lines.set(claim.name, (line = new LimiterLine()));
    await line.enter(ctx.signal);
    try {
      await waitForGrant(deps, claim, limit, id, ctx);
    } finally {
      line.leave();
    }
    let outcome: "ok" | "refused" | "failed" = "failed";
    try {
      const value = await next();
      outcome = "ok";
      return value;
    } catch (e) {
      const blockMs = rateLimitedFor(e);
      if (blockMs !== undefined) {
        outcome = "refused";
        await deps.store
          .blockLimiter(claim.name, deps.now() + blockMs)
          .catch((e: unknown) => deps.report(e));
      }
      throw e;
    } finally {
      await settle(deps, claim.name, id, settled(claim, ctx, outcome));
    }
  };
}

/** RL4: the settle, asked again after each of SETTLE_RETRY_MS, then reported. */
async function settle(deps: RateLimitDeps, limiter: string, id: string, used: LimiterUse) {
  for (let i = 0; ; i++) {
    try {
      return await deps.store.settle(limiter, id, used, deps.now());
    } catch (e) {
      const wait = SETTLE_RETRY_MS[i];
      if (wait === undefined) return deps.report(e);
      await delay(wait);
    }
  }
}

/**
 * RL4: what a call is settled with. An answered call: what it was metered (the provider's own
 * count, which corrects its estimate). A call the provider refused (429): nothing, it counted
 * none. Any other end (aborted mid-stream, failed, cut off): at least what it reserved, since the
 * provider may have counted the whole request when it arrived, as providers count `maxTokens` at
 * a request's start.
 */
function settled(
  claim: LimiterClaim,
  ctx: MiddlewareContext,
  outcome: "ok" | "refused" | "failed",
): { inputTokens: number; outputTokens: number } {
  if (outcome === "refused") return { inputTokens: 0, outputTokens: 0 };
  const tokens = ctx.metered().tokens;
  const used = { inputTokens: tokens?.input ?? 0, outputTokens: tokens?.output ?? 0 };
  if (outcome === "ok") return used;
  return {
    inputTokens: Math.max(used.inputTokens, claim.inputTokens),
    outputTokens: Math.max(used.outputTokens, claim.outputTokens),
  };
}

/** RL2, RL7 */
async function waitForGrant(
  deps: RateLimitDeps,
  claim: LimiterClaim,
  limit: RateLimit,
  id: string,
  ctx: MiddlewareContext,
): Promise<void> {
  const since = deps.now();
  let firstPosition: number | undefined;
  // RL2: whether the store holds a place of this call's, to withdraw however the wait ends.
  let placed = false;
  try {
    for (;;) {
      ctx.signal.throwIfAborted();
      const answer = await reserveOnce(deps, claim, limit, id, ctx);
      if (answer.granted) {
        placed = false;
        if (ctx.signal.aborted) {
          // RL2: ended while the grant was on its way: the call never runs, its tokens go back.
          const none = { inputTokens: 0, outputTokens: 0 };
          await deps.store.settle(claim.name, id, none, deps.now()).catch(deps.report);
          ctx.signal.throwIfAborted();
        }
        if (firstPosition !== undefined) {
          ctx.annotate?.({
            "loom.limiter.name": claim.name,
            "loom.limiter.wait_ms": deps.now() - since,
            "loom.limiter.position": firstPosition,
          });
        }
        return;
      }
      placed = true;
      firstPosition ??= answer.position;
      // Those further back ask less often: the line moves one grant at a time, and every ask
      // takes the limiter's lock (RL2).
      const back = answer.position * BEHIND_MS;
      const sleep = Math.min(MAX_SLEEP_MS, Math.max(1, answer.retryAtMs - deps.now(), back));
      await sleepUnless(ctx.signal, sleep);
    }
  } catch (e) {
    if (placed) await deps.store.withdraw(claim.name, id).catch(deps.report);
    throw e;
  }
}

/** One ask of the store (RL2); a store's failure stops the run (RL11). */
async function reserveOnce(
  deps: RateLimitDeps,
  claim: LimiterClaim,
  limit: RateLimit,
  id: string,
  ctx: MiddlewareContext,
): Promise<LimiterAnswer> {
  const now = deps.now();
  const ask = {
    id,
    executionId: ctx.executionId,
    requests: 1,
    inputTokens: claim.inputTokens,
    outputTokens: claim.outputTokens,
    // RL12: a step's timeout may be fractional or past 2^53 (checkedDuration); a time is neither.
    holdUntilMs: Math.min(
      Number.MAX_SAFE_INTEGER,
      now + Math.ceil(ctx.options.timeoutMs ?? HOLD_MS),
    ),
    sentByMs: now + SENT_WITHIN_MS,
    waitUntilMs: now + 3 * MAX_SLEEP_MS,
  };
  return deps.store.reserve(claim.name, limit, ask, now).catch((e: unknown) => {
    // RL11
    const error = e instanceof Error ? e : new Error(String(e));
    deps.stop(ctx.executionId, error);
    throw error;
  });
}

/** RL3, RL12 */
function refuseNeverFits(claim: LimiterClaim, limit: RateLimit, effect: string): void {
  for (const field of ["inputTokens", "outputTokens"] as const) {
    const v: unknown = claim[field];
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
      throw new InvalidInputError(
        `effect "${effect}" asks limiter "${claim.name}" for ${String(v)} ${field}: a claim's tokens must be a non-negative whole number`,
      );
    }
  }
  const over = (asked: number, max: number | undefined, what: string) => {
    if (max !== undefined && asked > max) {
      throw new InvalidInputError(
        `effect "${effect}" asks limiter "${claim.name}" for ${asked} ${what}, more than its ${max} per ${limit.windowMs} ms: it could never run (lower maxTokens or raise the limit)`,
      );
    }
  };
  over(1, limit.requests, "requests");
  over(claim.inputTokens, limit.inputTokens, "input tokens");
  over(claim.outputTokens, limit.outputTokens, "output tokens");
  over(claim.inputTokens + claim.outputTokens, limit.tokens, "tokens");
}

function sleepUnless(signal: AbortSignal, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    // An aborted signal fires no more events: it would have slept the whole time.
    if (signal.aborted) {
      reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function whole(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidInputError(`${what} must be a whole number >= 1, got ${String(value)}`);
  }
  return value;
}
