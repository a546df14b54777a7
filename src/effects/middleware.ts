/**
 * Effect middleware: what runs around every `ctx.execute(effect, input)`.
 *
 * The default chain, outermost first, is budget admission, then metering (DESIGN: admission
 * refuses before anything is spent; metering reports what the effect cost, also when it failed
 * or was aborted, ADR 0020 A2). A plain `ctx.run` step has no middleware, so a flow that runs no
 * effect and declares no budget writes the same log with or without the chain (G2).
 */
import { QuotaExceededError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import {
  addResources,
  exhausted,
  type Budget,
  type ResourceDelta,
  type ResourceSnapshot,
} from "../kernel/resources.ts";
import type { EffectContext } from "../runtime/flow.ts";
import { compose, type Middleware } from "./compose.ts";

/** A budget in force around an effect: the execution's, or a nested one by name. */
export interface BudgetInForce {
  name: string;
  budget: Budget;
  spent: ResourceSnapshot;
}

/** What middleware sees: the effect's context, its name, the budgets, and kernel facts. */
export interface MiddlewareContext extends EffectContext {
  readonly effect: string;
  readonly budgets: readonly BudgetInForce[];
  /** What `meter()` reported during this attempt so far. */
  metered(): ResourceDelta;
  /** Appends a kernel fact for this step (RESOURCE_METERED, QUOTA_EXCEEDED). */
  emit(kind: "RESOURCE_METERED" | "QUOTA_EXCEEDED", payload: { [k: string]: Json }): void;
  /** The runtime clock, epoch ms. */
  now(): number;
  /** Runs the effect itself: the end of the chain. */
  invoke(): Promise<unknown>;
}

export type EffectMiddleware = Middleware<MiddlewareContext>;

/** Refuses the effect, before it runs, when a budget in force is used up. */
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
    return next();
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

export function defaultMiddleware(): EffectMiddleware[] {
  return [budgetAdmission(), meteringMiddleware()];
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
