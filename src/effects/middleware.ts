/**
 * Effect middleware: what runs around every `ctx.execute(effect, input)`.
 *
 * The default chain, outermost first, is retry, budget admission, then metering (DESIGN:
 * admission refuses before anything is spent; metering reports what the effect cost, also when
 * it failed or was aborted, ADR 0020 A2; retry re-runs both for every attempt). A plain `ctx.run`
 * step has no middleware, so a flow that runs no effect and declares no budget writes the same
 * log with or without the chain (G2).
 */
import { QuotaExceededError } from "../kernel/errors.ts";
import { isPlainObject, type Json } from "../kernel/json.ts";
import {
  addResources,
  exhausted,
  type Budget,
  type ResourceDelta,
  type ResourceSnapshot,
} from "../kernel/resources.ts";
import type { EffectContext } from "../runtime/flow.ts";
import { compose, type Middleware } from "./compose.ts";
import { retryMiddleware, type RetryPolicy } from "./retry.ts";

/** A budget in force around an effect: the execution's, or a nested one by name. */
export interface BudgetInForce {
  name: string;
  budget: Budget;
  spent: ResourceSnapshot;
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
}

/** What middleware sees: the effect's context, its name, the budgets, and kernel facts. */
export interface MiddlewareContext extends EffectContext {
  readonly effect: string;
  /** The call's options (the effect's, overridden by the call's). */
  readonly options: ExecuteOptions;
  /** The budgets in force, with what was spent in them when read (each attempt reads afresh). */
  readonly budgets: readonly BudgetInForce[];
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

export type EffectMiddleware = Middleware<MiddlewareContext>;

/**
 * Refuses the effect, before it runs, when a budget in force is used up. A QuotaExceededError the
 * effect throws itself (a stream severed by its guard, K8.4) is recorded as a QUOTA_EXCEEDED
 * fact too, with what its details say (`estimated: true` for an estimate).
 */
export function budgetAdmission(): EffectMiddleware {
  return async (ctx, next) => {
    for (const b of ctx.budgets) {
      const dimension = exhausted(b.spent, b.budget);
      if (dimension === undefined) continue;
      ctx.emit("QUOTA_EXCEEDED", { callId: ctx.stepId, dimension, budget: b.name });
      throw new QuotaExceededError(
        `effect "${ctx.effect}" of execution "${ctx.executionId}" refused: the ${b.name} budget's ${dimension} is spent`,
        { dimension, budget: b.name },
      );
    }
    try {
      return await next();
    } catch (e) {
      if (e instanceof QuotaExceededError) {
        const details = isPlainObject(e.details) ? e.details : {};
        ctx.emit("QUOTA_EXCEEDED", {
          ...details,
          callId: ctx.stepId,
          dimension: typeof details.dimension === "string" ? details.dimension : "tokens",
        });
      }
      throw e;
    }
  };
}

/** Reports what the effect cost after it ran, failed or was aborted: at least `wallMs`. */
export function meteringMiddleware(): EffectMiddleware {
  return async (ctx, next) => {
    const started = ctx.now();
    try {
      return await next();
    } finally {
      const delta: ResourceDelta = { ...ctx.metered(), wallMs: Math.max(0, ctx.now() - started) };
      const payload: { [k: string]: Json } = {
        callId: ctx.stepId,
        delta: delta as unknown as Json,
      };
      const named = ctx.budgets.filter((b) => b.name !== "execution").map((b) => b.name);
      if (named.length > 0) payload.budgets = named;
      ctx.emit("RESOURCE_METERED", payload);
    }
  };
}

/**
 * Retry outermost, so each attempt passes admission (against what the failed attempts spent)
 * and is metered on its own; then budget admission, then metering.
 */
export function defaultMiddleware(options: { retry?: RetryPolicy } = {}): EffectMiddleware[] {
  return [retryMiddleware(options.retry), budgetAdmission(), meteringMiddleware()];
}

/** The chain the runtime runs around each effect. */
export function effectChain(middleware: readonly EffectMiddleware[]) {
  return compose(middleware, (ctx) => ctx.invoke());
}

/** Sums what `meter()` calls reported (used by the runtime's context). */
export function addDelta(total: ResourceDelta, delta: ResourceDelta): ResourceDelta {
  const sum: ResourceDelta = addResources(total, delta);
  if (total.estimated || delta.estimated) sum.estimated = true;
  return sum;
}
