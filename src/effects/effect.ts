/**
 * The Effect contract: what an effect, and the middleware around it, see of the runtime.
 *
 * It sits below the runtime so that `src/effects/` and `src/providers/` depend on this file and
 * the kernel only, never on `src/runtime/` (issue 19): an effect is written against these types,
 * and the runtime is one implementation of them.
 */
import type { StepNote } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import type { PriceTable } from "../kernel/prices.ts";
import type { Budget, ResourceDelta, ResourceSnapshot } from "../kernel/resources.ts";
import type { Middleware } from "./compose.ts";

export interface EffectContext {
  executionId: string;
  /** The step's deterministic call id within the execution. */
  stepId: string;
  /** 1 on the first attempt; higher when the step is re-run after a crash. */
  attempt: number;
  /** Stable across retries and recovery: pass it to the outside world to deduplicate. */
  idempotencyKey: string;
  /** Aborted when the runtime closes or loses the execution; forward it to what you call. */
  signal: AbortSignal;
  /** What the execution had spent when this attempt started. */
  resources: ResourceSnapshot;
  /** Reports what this attempt cost (tokens, cost, ...); metering writes it after the effect. */
  meter(delta: ResourceDelta): void;
  /**
   * The runtime's prices by model name (RuntimeOptions.prices): an LLM effect prices a model
   * from it before the pinned price data, and after its own `price` option (issue 20).
   */
  readonly prices?: PriceTable;
  /**
   * Tells the runtime what this attempt has cost so far, for when it is cut short before it can
   * meter (a cancel, a step timeout): the runtime then meters `soFar()`, marked as an estimate.
   * A streaming LLM call registers its running estimate here.
   */
  provisional?(soFar: () => ResourceDelta | undefined): void;
  /**
   * Records a fact about what this attempt set going outside the process (a remote task's id), as
   * soon as it is known: durable (a STEP_NOTED) before the promise resolves. If the process dies
   * mid-call, the attempt that runs the step next finds it in `notes`, and can stop or follow
   * what this one started instead of starting it twice (issue 21). A plain object of JSON
   * values, at most 16 KiB of JSON, at most 16 per attempt; a running attempt's only. Absent
   * where the effect runs out of the runtime's process (`isolated()`).
   */
  note?(fact: { [key: string]: Json }): Promise<void>;
  /**
   * What the attempts of this step noted (`note`), oldest first, this one's so far included:
   * on a recovered attempt, what the attempts before it set going. Empty for a fresh step.
   */
  readonly notes?: readonly StepNote[];
  /**
   * Adds attributes to this step's trace span (OpenTelemetry names: `gen_ai.*` for an LLM call),
   * present only while that span records (docs/tracing.md). Call it as
   * `ectx.annotate?.({ ... })`: when it is absent the call short-circuits and the attributes are
   * not even built.
   */
  readonly annotate?: ((attributes: StepAttributes) => void) | undefined;
  /**
   * Streams a text delta of this step, live, to the `runtime.deltas(id)` subscribers of the
   * runtime that runs it (effects/deltas.ts D1), not journaled. Absent where the effect runs out
   * of the runtime's process (`isolated()`).
   */
  publishDelta?(text: string): void;
}

/** Span attributes an effect reports (OpenTelemetry's attribute values; undefined is skipped). */
export type StepAttributes = Record<string, string | number | boolean | string[] | undefined>;

export interface Effect<I, O> {
  readonly name: string;
  run(input: I, ectx: EffectContext): Promise<O> | O;
  /**
   * Refuses a malformed input before anything is recorded (throw InvalidInputError). Pure: it
   * runs on every call, replays included.
   */
  checkInput?(input: I): void;
  /**
   * What one call may spend at most, per dimension (issue 20): budget admission holds it against
   * every budget in force while the call runs, so calls running at once (parallel branches)
   * cannot together pass a budget. Computed from the input (an LLM call's `maxTokens`, priced
   * with the runtime's `prices` where the effect prices its calls); pure, it runs before
   * anything is recorded. Without it a call holds nothing and is admitted while the
   * budget is not spent. A method, so that an Effect<I, O> is usable as an Effect<unknown, O>.
   */
  reserve?(input: I, prices?: PriceTable): ResourceDelta;
  /**
   * Names what this call would spend money on that cannot be priced (an LLM call's model that
   * neither its own price, the runtime's `prices` nor the price data prices), or undefined when
   * its cost can be metered. Under a cost budget such a call is refused before it runs
   * (PriceUnknownError, issue 20); one that runs is metered `costUnknown: true`.
   */
  unpriced?(input: I, prices: PriceTable): string | undefined;
  /**
   * The rate limiter a call reserves with before it runs (issue 26; runtime option
   * `rateLimits`), and what it may send and take: an LLM effect names `<provider>:<model>` and
   * its prompt's tokens (characters / 4) and `maxTokens`. Pure; computed before anything is
   * recorded. A call's `limiter` option names another limiter, or `false` for none.
   */
  limiter?(input: I): LimiterClaim | undefined;
  /** Options for every call of this effect (a retry policy, say); a call's own override them. */
  readonly options?: ExecuteOptions;
  /**
   * Marks every output of this effect as tainted from this source (a web fetch, a tool): the
   * step's recorded output is the wrapper `{ $tainted, value }` (kernel/taint.ts). A call's own
   * `taint` option names another source instead.
   */
  readonly taintsOutput?: string;
  /**
   * Refuses an input that holds a tainted value anywhere in it with TaintedInputError, before
   * anything is recorded (a shell, a payment): `untaint` what a person or a check has cleared.
   */
  readonly refusesTainted?: boolean;
}

/** What one call asks of a rate limiter (Effect.limiter): its name, and the tokens it may use. */
export interface LimiterClaim {
  name: string;
  inputTokens: number;
  outputTokens: number;
}

/** An effect whose output is always tainted: `ctx.execute` of it resolves to a `Tainted<O>`. */
export type TaintingEffect<I, O> = Effect<I, O> & { readonly taintsOutput: string };

/** A budget in force around an effect: the execution's, or a nested one by name. */
export interface BudgetInForce {
  name: string;
  budget: Budget;
  spent: ResourceSnapshot;
  /** What other calls in flight hold against this budget (their reservations). */
  held: ResourceSnapshot;
}

/** Per-call options of `ctx.execute(effect, input, options)`, over the effect's own. */
export interface ExecuteOptions {
  /** As for `ctx.run`: the step's timeout from its first attempt's logged start (K8.3). */
  timeoutMs?: number;
  /** As for `ctx.run`: at most once; a crash after its start is InDoubtError (K9). */
  atMostOnce?: boolean;
  /**
   * This call's retry policy over the retry middleware's, or `false` for a single attempt (read
   * by `retryMiddleware`, so it needs one in the chain, as the default chain has).
   */
  retry?: RetryPolicy | false;
  /**
   * Marks this call's output as tainted from this source (kernel/taint.ts): the step records
   * the wrapper `{ $tainted, value }`, so a replay returns it too. Over the effect's
   * `taintsOutput`; there is no option that removes a taint.
   */
  taint?: string;
  /**
   * The rate limiter this call reserves with (runtime option `rateLimits`), over the effect's
   * own (Effect.limiter), or `false` for none.
   */
  limiter?: string | false;
}

/** What middleware sees: the effect's context, its name, the budgets, and kernel facts. */
export interface MiddlewareContext extends EffectContext {
  readonly effect: string;
  /** The call's options (the effect's, overridden by the call's). */
  readonly options: ExecuteOptions;
  /** The budgets in force, with what was spent in them when read (each attempt reads afresh). */
  readonly budgets: readonly BudgetInForce[];
  /** What this call would spend that cannot be priced (the effect's `unpriced`), if anything. */
  readonly unpriced?: string | undefined;
  /** What this call may spend at most (the effect's `reserve`), if it declares it. */
  readonly reservation?: ResourceSnapshot | undefined;
  /** The rate limiter this call reserves with, and for how many tokens (Effect.limiter). */
  readonly limiter?: LimiterClaim | undefined;
  /**
   * Holds this call's reservation against the budgets in force until its attempt settles (budget
   * admission calls it once the call is admitted; the runtime releases it).
   */
  hold?(): void;
  /** What `meter()` reported during this attempt so far. */
  metered(): ResourceDelta;
  /** Appends a kernel fact for this step (RESOURCE_METERED, QUOTA_EXCEEDED). */
  emit(kind: "RESOURCE_METERED" | "QUOTA_EXCEEDED", payload: { [k: string]: Json }): void;
  /** The runtime clock, epoch ms. */
  now(): number;
  /** Runs the effect itself: the end of the chain. */
  invoke(): Promise<unknown>;
  /**
   * Records that this attempt failed and another follows in `retryInMs`: a
   * `STEP_FAILED { retrying: true }` fact, with the facts emitted during the attempt, committed
   * before it resolves.
   */
  failedAttempt(error: unknown, retryInMs: number): Promise<void>;
  /**
   * Starts the next attempt: `attempt` goes up by one and a `STEP_STARTED` is recorded (durably
   * before it resolves, for an at-most-once step).
   */
  beginAttempt(): Promise<void>;
}

export interface RetryPolicy {
  /** Attempts in all, the first included (default 3); 1 means no retry. */
  maxAttempts?: number;
  /** The wait before the second attempt (default 250 ms). */
  initialDelayMs?: number;
  /** Each wait is this many times the one before (default 2). */
  backoffFactor?: number;
  /** No wait is longer (default 10 s), except a `RetryableError`'s `retryAfterMs`. */
  maxDelayMs?: number;
  /** Up to this fraction of each wait is taken off at random, seeded (0..1, default 0.5). */
  jitter?: number;
  /** Whether a failure may be retried (default: `defaultIsRetryable`). Never asked on an abort. */
  isRetryable?: (error: unknown, ctx: MiddlewareContext) => boolean;
}

/** A middleware around every effect call (effects/middleware.ts composes the chain). */
export type EffectMiddleware = Middleware<MiddlewareContext>;
