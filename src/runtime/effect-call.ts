/**
 * The pieces of a step that run an effect: what an attempt collects, the context its middleware
 * sees, and the budgets in force around it.
 */
import type { Budget, ResourceDelta } from "../kernel/resources.ts";
import type { BudgetInForce, ExecuteOptions, MiddlewareContext } from "../effects/middleware.ts";
import type { ContextDeps } from "./context.ts";
import type { EffectContext } from "./flow.ts";
import type { EventSpec, Run } from "./run.ts";

/**
 * What the current attempt of a step collects: what `meter()` reported, and the kernel facts
 * middleware emitted, written in the same append as the attempt's settling event. `failed` and
 * `next` record a failed attempt and start the next one (retry).
 */
export interface StepAttempt {
  reported: ResourceDelta;
  facts: EventSpec[];
  /** Runs the step's own code under its signal (pre-flight check, timeout race). */
  invoke<R>(work: () => R | Promise<R>): Promise<R>;
  failed(error: unknown, retryInMs: number): Promise<void>;
  next(): Promise<void>;
}

/** The context every middleware of an effect sees; `invoke` runs the effect itself. */
export function makeMiddlewareContext(
  run: Run,
  deps: ContextDeps,
  nested: readonly NestedBudget[],
  effect: string,
  options: ExecuteOptions,
  ectx: EffectContext,
  attempt: StepAttempt,
  invoke: () => Promise<unknown>,
): MiddlewareContext {
  let budgets: { seq: number; inForce: BudgetInForce[] } | undefined;
  return {
    executionId: ectx.executionId,
    stepId: ectx.stepId,
    get attempt() {
      return ectx.attempt;
    },
    idempotencyKey: ectx.idempotencyKey,
    get signal() {
      return ectx.signal;
    },
    get resources() {
      return ectx.resources;
    },
    meter: (delta) => ectx.meter(delta),
    provisional: (soFar) => ectx.provisional?.(soFar),
    effect,
    options,
    // Read afresh once the log moved (a failed attempt's spend), else reused within the attempt.
    get budgets() {
      if (budgets?.seq !== run.state.seq) {
        budgets = { seq: run.state.seq, inForce: budgetsInForce(run, nested) };
      }
      return budgets.inForce;
    },
    metered: () => attempt.reported,
    emit: (kind, payload) => {
      attempt.facts.push({ kind, payload });
      // What was metered is reported once: the next attempt starts from nothing.
      if (kind === "RESOURCE_METERED") attempt.reported = {};
    },
    now: () => deps.now(),
    invoke,
    failedAttempt: (error, retryInMs) => attempt.failed(error, retryInMs),
    beginAttempt: () => attempt.next(),
  };
}

/** The execution's budget and the nested ones around the call, with what each has spent. */
function budgetsInForce(run: Run, nested: readonly NestedBudget[]): BudgetInForce[] {
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
  return budgets;
}

/** A nested budget around part of a flow (ctx.nestedBudget). */
export interface NestedBudget {
  name: string;
  budget: Budget;
}
