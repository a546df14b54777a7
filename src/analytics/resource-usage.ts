/**
 * What an execution spent against its budgets, per dimension (issue 11): a pure projection of a
 * folded state, for bars of spent against limit.
 *
 * Invariants (tests cite U1..U5):
 * U1. One row per dimension that was spent or is limited, in a fixed order: tokens, the scalar
 *     dimensions (costUsd, ms, memBytes, wallMs, netBytes), then custom ones by name. A dimension
 *     never spent and never limited has no row (Q1: unset is not zero).
 * U2. The execution's rows count what it spent (`_resources`); what it granted to children still
 *     running is shown apart as `held` (fold/children.ts F10), and `fraction` is
 *     (spent + held) / limit, the figure budget admission compares.
 * U3. A nested budget (`ctx.nestedBudget`) is a usage of its own, from `_scopeResources`; the log
 *     does not record its limits, so its rows have none.
 * U4. `exceeded` marks the dimension the last QUOTA_EXCEEDED named, in the budget it named.
 * U5. When some call could not be priced (`costUnknown`, kernel/resources.ts Q7) the costUsd row
 *     is there, spent or not, marked `costUnknown`: its `spent` is a lower bound.
 */
import { spentWithGrants } from "../fold/children.ts";
import type { ExecutionState } from "../fold/state.ts";
import {
  SCALAR_DIMENSIONS,
  spentIn,
  type Budget,
  type ResourceSnapshot,
} from "../kernel/resources.ts";

export interface UsageRow {
  /** "tokens", a scalar dimension, or "custom.<name>". */
  dimension: string;
  spent: number;
  /** Tokens only: the split of `spent`. */
  tokens?: { input: number; output: number };
  /** Granted to children still running, counted as spent by admission (U2). */
  held?: number;
  limit?: number;
  /** (spent + held) / limit, when there is a limit above 0. */
  fraction?: number;
  exceeded?: true;
  /** costUsd only: some calls could not be priced, so `spent` is a lower bound (U5). */
  costUnknown?: true;
}

export interface BudgetUsage {
  /** "execution", or a nested budget's name. */
  budget: string;
  rows: UsageRow[];
}

/** The execution's usage, then each nested budget's (U1..U5). */
export function resourceUsage(state: ExecutionState): BudgetUsage[] {
  const quota = state._quotaExceeded;
  const spent = state._resources ?? {};
  const withGrants = spentWithGrants(state);
  const execution = rowsOf(spent, state._budget, quota?.budget === "execution" ? quota : undefined);
  for (const row of execution) {
    const held = spentIn(withGrants, row.dimension) - row.spent;
    if (held > 0) row.held = held;
    if (row.limit !== undefined && row.limit > 0) {
      row.fraction = (row.spent + (row.held ?? 0)) / row.limit;
    }
  }
  const out: BudgetUsage[] = [{ budget: "execution", rows: execution }];
  for (const [name, scoped] of Object.entries(state._scopeResources ?? {})) {
    out.push({
      budget: name,
      rows: rowsOf(scoped, undefined, quota?.budget === name ? quota : undefined),
    });
  }
  return out;
}

function rowsOf(
  spent: ResourceSnapshot,
  budget: Budget | undefined,
  quota: { dimension: string } | undefined,
): UsageRow[] {
  const dims: string[] = [];
  if (spent.tokens !== undefined || budget?.tokens !== undefined) dims.push("tokens");
  for (const k of SCALAR_DIMENSIONS) {
    const unknown = k === "costUsd" && spent.costUnknown === true; // U5
    if (spent[k] !== undefined || budget?.[k] !== undefined || unknown) dims.push(k);
  }
  const custom = new Set([
    ...Object.keys(spent.custom ?? {}),
    ...Object.keys(budget?.custom ?? {}),
  ]);
  for (const k of [...custom].sort()) dims.push(`custom.${k}`);
  return dims.map((dimension) => {
    const row: UsageRow = { dimension, spent: spentIn(spent, dimension) };
    if (dimension === "tokens") {
      row.tokens = { input: spent.tokens?.input ?? 0, output: spent.tokens?.output ?? 0 };
    }
    const limit = limitOf(budget, dimension);
    if (limit !== undefined) {
      row.limit = limit;
      if (limit > 0) row.fraction = row.spent / limit;
    }
    if (quota?.dimension === dimension) row.exceeded = true;
    if (dimension === "costUsd" && spent.costUnknown === true) row.costUnknown = true;
    return row;
  });
}

function limitOf(budget: Budget | undefined, dimension: string): number | undefined {
  if (!budget) return undefined;
  if (dimension === "tokens") return budget.tokens;
  if (dimension.startsWith("custom.")) {
    const name = dimension.slice("custom.".length);
    return budget.custom && Object.hasOwn(budget.custom, name) ? budget.custom[name] : undefined;
  }
  return budget[dimension as (typeof SCALAR_DIMENSIONS)[number]];
}
