/**
 * Budgets and negotiation: `ctx.negotiateBudget` asks for more of a dimension up to a ceiling
 * (the grant is a recorded decision), and `ctx.nestedBudget` runs part of a flow under a budget
 * of its own (a context whose metered effects also count against it).
 *
 * Invariants kept here:
 * - N1 (issue 20): a flow cannot choose its own ceiling. The ceiling of a negotiation is the
 *   runtime's (RuntimeOptions.negotiation) for that dimension, which the flow's `{ ceiling }` can
 *   only lower; with none, the execution's budget in that dimension is the ceiling, so nothing is
 *   granted beyond it.
 * - N2 (issue 20): a child whose budget is a grant from its parent's (children.ts O6) cannot
 *   negotiate past its grant, whatever the outside ceiling: its parent counts the grant as spent
 *   and nothing more, so more would be spent past the parent's budget. A parent gives a child
 *   more by spawning it with more.
 * - R2 (run.ts): a negotiation the log answers returns the grant it recorded.
 * - O6 (children.ts), F10 (fold/children.ts): grants to children still running count as spent.
 */
import { inFlowScope } from "./flow-scope.ts";
import { spentWithGrants } from "../fold/children.ts";
import { NEGOTIATE } from "../fold/fold.ts";
import { safeKey } from "../fold/frames.ts";
import { InvalidInputError } from "../kernel/errors.ts";
import { isDimension, limitIn, spentIn, type Budget } from "../kernel/resources.ts";
import type { FlowContext } from "./contract.ts";
import { assertName, checkedBudget } from "./flow.ts";
import type { Scope } from "./syscalls-scope.ts";

export function budgetSyscalls(s: Scope): Pick<FlowContext, "negotiateBudget" | "nestedBudget"> {
  const { run, deps, scope, nested } = s;
  return {
    async negotiateBudget(dimension, request, options) {
      if (!isDimension(dimension)) {
        throw new InvalidInputError(
          `negotiateBudget needs a dimension (tokens, costUsd, ms, memBytes, wallMs, netBytes or custom.<name>), got ${JSON.stringify(dimension)}`,
        );
      }
      const ceiling = options?.ceiling;
      for (const [what, v] of [
        ["request", request],
        ["ceiling", ceiling],
      ] as const) {
        if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
          throw new InvalidInputError(
            `negotiateBudget ${what} must be a finite number >= 0, got ${String(v)}`,
          );
        }
      }
      return s.call("negotiateBudget", async () => {
        const claim = run.claim(scope, "decision", NEGOTIATE);
        if (claim.recorded) {
          const value = run.state._decisions[claim.callId] as { grant?: unknown };
          return typeof value.grant === "number" ? value.grant : 0;
        }
        // Grants to children still running count as spent (children.ts O6, F10).
        const spent = spentIn(spentWithGrants(run.state), dimension);
        // N1: the outside ceiling, which the flow's own can only lower.
        const outside =
          deps.negotiation[dimension]?.ceiling ?? limitIn(run.state._budget, dimension);
        // N2: a grant from the parent's budget is the child's ceiling too.
        const granted = run.state._parent?.granted
          ? limitIn(run.state._budget, dimension)
          : outside;
        const effective = Math.min(ceiling, outside, granted);
        const grant = Math.max(0, Math.min(request, effective - spent));
        const value = {
          dimension,
          request,
          ceiling: effective,
          grant,
          limit: spent + grant,
        };
        const done = run.enqueue([
          {
            kind: "DECISION_RECORDED",
            payload: { callId: claim.callId, scope, name: NEGOTIATE, value },
          },
        ]);
        claim.take();
        await done;
        return grant;
      });
    },

    async nestedBudget<T>(
      name: string,
      budget: Budget,
      fn: (ctx: FlowContext) => Promise<T>,
    ): Promise<T> {
      assertName(name, "budget name");
      if (!safeKey(name)) {
        throw new InvalidInputError(
          `budget name ${JSON.stringify(name)} is reserved by JavaScript objects; pick another name`,
        );
      }
      if (name === "execution") {
        throw new InvalidInputError(
          '"execution" names the execution\'s own budget; pick another name',
        );
      }
      const checked = checkedBudget(budget, `nested budget "${name}"`);
      if (typeof fn !== "function") throw new InvalidInputError("nestedBudget needs a function");
      const ctx = s.makeContext(run, deps, scope, [...nested, { name, budget: checked }]);
      return inFlowScope({ ctx }, () => fn(ctx)); // FS1
    },
  };
}

/** A runtime's negotiation policy, checked when the runtime is made (N1). */
export function checkedNegotiation(value: unknown): Record<string, { ceiling: number }> {
  if (value === undefined) return {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidInputError("negotiation must be an object of { ceiling } by dimension");
  }
  const out: Record<string, { ceiling: number }> = {};
  for (const [dimension, rule] of Object.entries(value)) {
    const ceiling = (rule as { ceiling?: unknown } | null)?.ceiling;
    if (!isDimension(dimension) || typeof ceiling !== "number" || !(ceiling >= 0)) {
      throw new InvalidInputError(
        `negotiation.${dimension} must be { ceiling: a number >= 0 } for a dimension (tokens, costUsd, ms, memBytes, wallMs, netBytes or custom.<name>)`,
      );
    }
    out[dimension] = { ceiling };
  }
  return out;
}
