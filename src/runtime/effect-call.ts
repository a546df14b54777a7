/**
 * The pieces of a step that run an effect: what an attempt collects, the context its middleware
 * sees, and the budgets in force around it.
 */
import type { Budget, ResourceDelta } from "../kernel/resources.ts";
import type { BudgetInForce, MiddlewareContext } from "../effects/middleware.ts";
import type { ContextDeps } from "./context.ts";
import type { EffectContext } from "./flow.ts";
import type { EventSpec, Run } from "./run.ts";

/**
 * What one attempt of a step collects: what `meter()` reported, and the kernel facts middleware
 * emitted, written in the same append as the step's settling event.
 */
export interface StepAttempt {
  reported: ResourceDelta;
  facts: EventSpec[];
}

/** The context every middleware of an effect sees; `invoke` runs the effect itself. */
export function makeMiddlewareContext(
  run: Run,
  deps: ContextDeps,
  nested: readonly NestedBudget[],
  effect: string,
  ectx: EffectContext,
  attempt: StepAttempt,
  invoke: () => Promise<unknown>,
): MiddlewareContext {
  const budgets: BudgetInForce[] = [];
  if (run.state._budget) {
    budgets.push({
      name: "execution",
      budget: run.state._budget,
      spent: run.state._resources ?? {},
    });
  }
  for (const b of nested) {
    budgets.push({
      name: b.name,
      budget: b.budget,
      spent: run.state._scopeResources?.[b.name] ?? {},
    });
  }
  return {
    executionId: ectx.executionId,
    stepId: ectx.stepId,
    attempt: ectx.attempt,
    idempotencyKey: ectx.idempotencyKey,
    get signal() {
      return ectx.signal;
    },
    resources: ectx.resources,
    meter: (delta) => ectx.meter(delta),
    effect,
    budgets,
    metered: () => attempt.reported,
    emit: (kind, payload) => attempt.facts.push({ kind, payload }),
    now: () => deps.now(),
    invoke,
  };
}

/** A nested budget around part of a flow (ctx.nestedBudget). */
export interface NestedBudget {
  name: string;
  budget: Budget;
}
