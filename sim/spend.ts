/**
 * SIM4 on what the world really spent (issue 20), not only on what the logs record: every attempt
 * of the `work` effect spends its tokens the moment it begins (workload.ts), and the world counts
 * them by execution id (RealSpend), whether the attempt is then recorded, crashed, cancelled,
 * aborted or retried. Checked once everything has ended, on every log of the run:
 *
 * B1. A tree is a chain (all its generations) with its descendants' chains, found through the
 *     parent links of their EXECUTION_STARTED (a child's `parent.chainId`). Each chain whose
 *     generation 0 starts with a token budget (an operator's budget, a child's grant or its own)
 *     heads a tree held to it: what its tree's attempts really spent is at most the budget plus
 *     one reservation (MAX_STEP_TOKENS).
 * B2. A fork starts from what its prefix recorded: the spend it carried at the fork point (its
 *     copied `_resources`, plus, for each copied slot of a child still out with a grant, what the
 *     child's chain reported when the fork's chain settled the slot, else the grant) plus what its
 *     own tree really spent is held to the same bound. The origin's children are the origin's
 *     tree's: their spend reaches the fork only as that report. A prefix that recorded more than
 *     the budget counts as the budget: the fork can then spend one reservation at most, and the
 *     excess is the origin's (its tree is held to B1; see the note below on charges).
 * B3. An execution records no more than its attempts spent: the tokens its own (not copied)
 *     RESOURCE_METERED events report as measured are at most what its attempts really spent. The
 *     charges marked as estimates (a crashed attempt's, C2; a cancel's, C3) are left out: one may
 *     charge an attempt that was stopped before it began. With the reservation equal to the cost,
 *     the charge of an attempt that did begin equals what it spent.
 * B4. No attempt spends for an execution the run has no log of.
 *
 * The recorded spend is not held to the budget: it may pass it by charges for attempts that never
 * ran. C1 makes an attempt's STEP_STARTED, with its reservation, durable before budget admission
 * decides on it, so a crash between that commit and a refusal leaves a reservation that recovery
 * charges (C2), once per crash (seed 59: a child granted 0 tokens recorded 43, spending none).
 * That errs on the safe side (admission refuses sooner), and B1 holds whatever was charged.
 */
import type { Envelope } from "../src/kernel/events.ts";
import { isPlainObject, type Json } from "../src/kernel/json.ts";
import { readChildOutcome } from "../src/kernel/children.ts";
import { addResources, spentIn } from "../src/kernel/resources.ts";
import { foldAll } from "../src/fold/fold.ts";
import { MAX_STEP_TOKENS } from "./workload.ts";

/** What the world's attempts really spent, in tokens, by execution id. */
export class RealSpend {
  private readonly byId = new Map<string, number>();

  /** An attempt of `executionId` began, and spent `tokens`. */
  spend(executionId: string, tokens: number): void {
    this.byId.set(executionId, (this.byId.get(executionId) ?? 0) + tokens);
  }

  of(executionId: string): number {
    return this.byId.get(executionId) ?? 0;
  }

  ids(): IterableIterator<string> {
    return this.byId.keys();
  }
}

/** A chain as SIM4 sees it: its generations, its parent chain, its budget. */
interface Chain {
  /** Its generations' ids, by generation. */
  ids: string[];
  parent?: string;
  budgetTokens?: number;
  /** Generation 0's log. */
  first: readonly Envelope[];
  children: string[];
}

const copied = (e: Envelope) => isPlainObject(e.meta) && e.meta.forkedFrom !== undefined;

/** B1..B4, once everything has ended: `logs` has every log of the run (every generation). */
export function checkSpend(
  logs: ReadonlyMap<string, readonly Envelope[]>,
  real: RealSpend,
  out: string[],
): void {
  const chains = chainsOf(logs);
  for (const id of real.ids()) {
    if (!logs.has(id)) out.push(`SIM4 ${id}: spent ${real.of(id)} tokens, and has no log`); // B4
  }
  for (const [id, log] of logs) checkRecorded(id, log, real, out);
  const memo = new Map<string, number>();
  const treeSpend = (chainId: string): number => {
    const known = memo.get(chainId);
    if (known !== undefined) return known;
    const c = chains.get(chainId);
    let sum = 0;
    for (const id of c?.ids ?? []) sum += real.of(id);
    for (const child of c?.children ?? []) sum += treeSpend(child);
    memo.set(chainId, sum);
    return sum;
  };
  for (const [chainId, c] of chains) {
    // B1, and B2 for a fork (its generation 0 holds copies).
    if (c.budgetTokens === undefined) continue;
    const spent = treeSpend(chainId);
    const carried = c.first.some(copied) ? carriedAt(c, logs) : 0;
    const bound = c.budgetTokens + MAX_STEP_TOKENS;
    if (spent + Math.min(carried, c.budgetTokens) > bound) {
      const from = carried > 0 ? `, and carried ${carried} from its fork point` : "";
      out.push(
        `SIM4 ${chainId}: its tree really spent ${spent} tokens${from}, budget ${c.budgetTokens}, bound ${bound}`,
      );
    }
  }
}

/** The chains of `logs`, each with its generations and its children's chains. */
function chainsOf(logs: ReadonlyMap<string, readonly Envelope[]>): Map<string, Chain> {
  const chains = new Map<string, Chain>();
  const chainOf = (chainId: string): Chain => {
    let c = chains.get(chainId);
    if (!c) chains.set(chainId, (c = { ids: [], first: [], children: [] }));
    return c;
  };
  for (const [id, log] of logs) {
    const start = log[0];
    if (!start) continue;
    const s = foldAll([start]);
    const c = chainOf(s._chain?.chainId ?? id);
    const n = s._chain?.generation ?? 0;
    c.ids[n] = id;
    if (n !== 0) continue;
    c.first = log;
    if (s._budget?.tokens !== undefined) c.budgetTokens = s._budget.tokens;
    if (s._parent) c.parent = s._parent.chainId;
  }
  for (const [chainId, c] of chains) {
    c.ids = c.ids.filter((id) => typeof id === "string"); // a generation with no log: a gap
    if (c.parent !== undefined) chainOf(c.parent).children.push(chainId);
  }
  return chains;
}

/** B2: what a fork's chain carried from its fork point, its children's grants as they settled. */
function carriedAt(c: Chain, logs: ReadonlyMap<string, readonly Envelope[]>): number {
  const s = foldAll(c.first.filter(copied));
  let carried = spentIn(s._resources, "tokens");
  for (const [childId, child] of Object.entries(s._children ?? {})) {
    if (!child.granted || child.outcome || child.budget?.tokens === undefined) continue;
    carried += reported(c, logs, childId) ?? child.budget.tokens;
  }
  return carried;
}

/** What the first CHILD_DONE of `childId` in the chain's own events says the child spent. */
function reported(
  c: Chain,
  logs: ReadonlyMap<string, readonly Envelope[]>,
  childId: string,
): number | undefined {
  for (const id of c.ids) {
    for (const e of logs.get(id) ?? []) {
      if (e.kind !== "CHILD_DONE" || copied(e)) continue;
      const p = e.payload as { childId?: Json; outcome?: Json };
      const outcome = p.childId === childId ? readChildOutcome(p.outcome) : undefined;
      if (outcome) return spentIn(outcome.resources, "tokens");
    }
  }
  return undefined;
}

/** B3 */
function checkRecorded(id: string, log: readonly Envelope[], real: RealSpend, out: string[]) {
  let measured = 0;
  for (const e of log) {
    if (e.kind !== "RESOURCE_METERED" || copied(e)) continue;
    const delta = (e.payload as { delta?: unknown }).delta;
    if (!isPlainObject(delta) || delta.estimated === true) continue;
    measured += spentIn(addResources({}, delta), "tokens");
  }
  if (measured > real.of(id)) {
    out.push(
      `SIM4 ${id}: recorded ${measured} tokens as measured, its attempts really spent ${real.of(id)}`,
    );
  }
}
