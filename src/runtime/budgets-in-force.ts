/**
 * The budgets in force around a call: the execution's, then each nested one (ctx.nestedBudget)
 * it runs under, each with what was spent in it, grants to children still running counted as
 * spent (children.ts O6, fold F10). Budget admission and a spawn's grant read them.
 */
import { scopeSpentWithGrants, spentWithGrants } from "../fold/children.ts";
import type { Budget } from "../kernel/resources.ts";
import type { BudgetInForce } from "../effects/middleware.ts";
import type { Run } from "./run.ts";

/** The execution's budget and the nested ones around the call, with what each has spent. */
export function budgetsInForce(run: Run, nested: readonly NestedBudget[]): BudgetInForce[] {
  const budgets: BudgetInForce[] = [];
  if (run.state._budget) {
    budgets.push({
      name: "execution",
      budget: run.state._budget,
      // Grants to children still running count as spent (children.ts O6, F10).
      spent: spentWithGrants(run.state),
      held: {},
    });
  }
  for (const b of nested) {
    budgets.push({
      name: b.name,
      budget: b.budget,
      // Grants to children spawned under it and still running count as spent (F10).
      spent: scopeSpentWithGrants(run.state, b.name),
      held: {},
    });
  }
  return budgets;
}

/** A nested budget around part of a flow (ctx.nestedBudget). */
export interface NestedBudget {
  name: string;
  budget: Budget;
}
