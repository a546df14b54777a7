/**
 * Effect middleware: what runs around every `ctx.execute(effect, input)`.
 *
 * The default chain, outermost first, is retry, budget admission, then metering (DESIGN:
 * admission refuses before anything is spent; metering reports what the effect cost, also when
 * it failed or was aborted, ADR 0020 A2; retry re-runs both for every attempt). A plain `ctx.run`
 * step has no middleware, so a flow that runs no effect and declares no budget writes the same
 * log with or without the chain (G2).
 */
import { PriceUnknownError, QuotaExceededError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { addResources, exhausted, overBudget, type ResourceDelta } from "../kernel/resources.ts";
import { compose } from "./compose.ts";
import { retryMiddleware } from "./retry.ts";
import type { EffectMiddleware, MiddlewareContext, RetryPolicy } from "./effect.ts";

export type {
  BudgetInForce,
  EffectMiddleware,
  ExecuteOptions,
  MiddlewareContext,
} from "./effect.ts";

/**
 * Refuses the effect, before it runs, when a budget in force is used up, or would be with what the
 * calls in flight hold and this call's reservation (Q4), and else holds the reservation while the
 * call runs.
 */
export function budgetAdmission(options: AdmissionOptions = {}): EffectMiddleware {
  const allowUnpriced = options.unpricedCost === "allow";
  return role("admission", async (ctx, next) => {
    if (ctx.unpriced !== undefined && !allowUnpriced) refuseUnpriced(ctx);
    for (const b of ctx.budgets) {
      const dimension = overBudget(b.spent, b.held, ctx.reservation, b.budget);
      if (dimension === undefined) continue;
      ctx.emit("QUOTA_EXCEEDED", { callId: ctx.stepId, dimension, budget: b.name });
      const why =
        exhausted(addResources(b.spent, b.held), b.budget) === undefined
          ? "has no room for this call's reservation beside the calls in flight"
          : "is spent";
      throw new QuotaExceededError(
        `effect "${ctx.effect}" of execution "${ctx.executionId}" refused: the ${b.name} budget's ${dimension} ${why}`,
        { dimension, budget: b.name },
      );
    }
    if (ctx.reservation !== undefined && ctx.budgets.length > 0) ctx.hold?.();
    // A QuotaExceededError the effect throws itself (a stream its guard severed) is recorded by
    // the runtime, whatever the chain (Q5 in runtime/syscalls-step-machinery.ts).
    return next();
  });
}

/** How budget admission treats a call whose cost cannot be priced. */
export interface AdmissionOptions {
  /**
   * `"refuse"` (the default): under a budget that limits `costUsd`, a call that names what it
   * cannot price (Effect.unpriced) is PriceUnknownError before it runs. `"allow"`: it runs, and
   * is metered `costUnknown: true` (what `costUsd` says it spent is a lower bound).
   */
  unpricedCost?: "refuse" | "allow";
}

/** PriceUnknownError, with its QUOTA_EXCEEDED fact, when a budget in force limits `costUsd`. */
function refuseUnpriced(ctx: MiddlewareContext): void {
  const b = ctx.budgets.find((x) => x.budget.costUsd !== undefined);
  if (b === undefined) return;
  ctx.emit("QUOTA_EXCEEDED", {
    callId: ctx.stepId,
    dimension: "costUsd",
    budget: b.name,
    priceUnknown: ctx.unpriced ?? null,
  });
  throw new PriceUnknownError(
    `effect "${ctx.effect}" of execution "${ctx.executionId}" refused: the ${b.name} budget limits costUsd and the cost of ${JSON.stringify(ctx.unpriced)} cannot be priced; give the effect a price ({ price: { inputPerMTok, outputPerMTok } }), give the runtime one (createRuntime({ prices: { ${JSON.stringify(ctx.unpriced)}: { inputPerMTok, outputPerMTok } } })) or create the runtime with unpricedCost: "allow"`,
    { dimension: "costUsd", budget: b.name, model: ctx.unpriced ?? null },
  );
}

/**
 * Reports what the effect cost after it ran, failed or was aborted: at least `wallMs`; and
 * `costUnknown` for a call that named what it could not price (Effect.unpriced), which ran only
 * because unpriced costs are allowed or no cost budget was in force.
 */
export function meteringMiddleware(): EffectMiddleware {
  return role("metering", async (ctx, next) => {
    const started = ctx.now();
    try {
      return await next();
    } finally {
      const delta: ResourceDelta = { ...ctx.metered(), wallMs: Math.max(0, ctx.now() - started) };
      if (ctx.unpriced !== undefined) delta.costUnknown = true;
      const payload: { [k: string]: Json } = {
        callId: ctx.stepId,
        delta: delta as unknown as Json,
      };
      const named = ctx.budgets.filter((b) => b.name !== "execution").map((b) => b.name);
      if (named.length > 0) payload.budgets = named;
      ctx.emit("RESOURCE_METERED", payload);
    }
  });
}

/**
 * Retry outermost, so each attempt passes admission (against what the failed attempts spent)
 * and is metered on its own; then budget admission, then metering.
 */
export function defaultMiddleware(
  options: { retry?: RetryPolicy } & AdmissionOptions = {},
): EffectMiddleware[] {
  return [retryMiddleware(options.retry), budgetAdmission(options), meteringMiddleware()];
}

/**
 * The chain the runtime runs around each effect (G3: a budget holds whatever the chain). A chain
 * without Loom's budget admission, or without its metering, gets them innermost, acting only on
 * calls with a budget in force: a call with none runs through the chain as given.
 */
export function effectChain(
  middleware: readonly EffectMiddleware[],
  options: AdmissionOptions = {},
  /** The runtime's own innermost middleware (its rate limits), which no chain can leave out. */
  innermost: readonly EffectMiddleware[] = [],
) {
  const has = (r: Role) => middleware.some((m) => (m as Partial<Roled>)[ROLE] === r);
  const missing: EffectMiddleware[] = [];
  if (!has("admission")) missing.push(budgetAdmission(options));
  if (!has("metering")) missing.push(meteringMiddleware());
  if (missing.length === 0) return compose([...middleware, ...innermost], (ctx) => ctx.invoke());
  const guard = compose([...missing, ...innermost], (ctx) => ctx.invoke());
  const inner = compose([...innermost], (ctx) => ctx.invoke());
  const underBudget: EffectMiddleware = (ctx) =>
    ctx.budgets.length === 0 ? inner(ctx) : guard(ctx);
  return compose([...middleware, underBudget], (ctx) => ctx.invoke());
}

const ROLE = Symbol("loom.middleware.role");
type Role = "admission" | "metering";
interface Roled {
  [ROLE]: Role;
}

/** Marks one of Loom's own middleware with its role, so effectChain can tell it is there. */
function role(r: Role, m: EffectMiddleware): EffectMiddleware {
  return Object.assign(m, { [ROLE]: r });
}

/**
 * Sums what `meter()` calls reported (used by the runtime's context): an estimate in either makes
 * the sum one, and the latest `priced` says what priced it.
 */
export function addDelta(total: ResourceDelta, delta: ResourceDelta): ResourceDelta {
  const sum: ResourceDelta = addResources(total, delta);
  if (total.estimated || delta.estimated) sum.estimated = true;
  const priced = delta.priced ?? total.priced;
  if (priced !== undefined) sum.priced = priced;
  return sum;
}
