/**
 * Budgets and negotiation: `ctx.negotiateBudget` asks for more of a dimension up to a ceiling
 * (the grant is a recorded decision), and `ctx.nestedBudget` runs part of a flow under a budget
 * of its own (a context whose metered effects also count against it).
 *
 * Invariants kept here:
 * - R2 (run.ts): a negotiation the log answers returns the grant it recorded.
 * - O6 (children.ts), F10 (fold/children.ts): grants to children still running count as spent.
 */
import { spentWithGrants } from "../fold/children.ts";
import { NEGOTIATE } from "../fold/fold.ts";
import { InvalidInputError } from "../kernel/errors.ts";
import { isDimension, spentIn, type Budget } from "../kernel/resources.ts";
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
        const grant = Math.max(0, Math.min(request, ceiling - spent));
        const value = {
          dimension,
          request,
          ceiling: ceiling,
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
      if (name === "execution") {
        throw new InvalidInputError(
          '"execution" names the execution\'s own budget; pick another name',
        );
      }
      const checked = checkedBudget(budget, `nested budget "${name}"`);
      if (typeof fn !== "function") throw new InvalidInputError("nestedBudget needs a function");
      return fn(s.makeContext(run, deps, scope, [...nested, { name, budget: checked }]));
    },
  };
}
