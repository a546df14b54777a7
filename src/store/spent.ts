/**
 * What an execution has spent, as its row keeps it (spi.ts S24): the cost, whether some of it
 * could not be priced, and the tokens, from the folded `_resources` the runtime sends with a
 * batch that changed them.
 */
import type { ResourceSnapshot } from "../kernel/resources.ts";

/** What an execution has spent, as its row keeps it: from its folded `_resources` (`spentOf`). */
export interface Spent {
  costUsd?: number;
  /** `costUsd` is a lower bound: some call could not be priced. */
  costUnknown?: true;
  /** Input plus output tokens. */
  tokens?: number;
}

/** The `Spent` of a folded `_resources`; undefined when it holds none of the three. */
export function spentOf(r: ResourceSnapshot | undefined): Spent | undefined {
  if (!r) return undefined;
  const out: Spent = {};
  if (r.costUsd !== undefined) out.costUsd = r.costUsd;
  if (r.costUnknown === true) out.costUnknown = true;
  const t = r.tokens;
  if (t && (t.input !== undefined || t.output !== undefined)) {
    out.tokens = (t.input ?? 0) + (t.output ?? 0);
  }
  return out.costUsd === undefined && out.costUnknown === undefined && out.tokens === undefined
    ? undefined
    : out;
}

/** Whether two `Spent` say the same (both absent counts). */
export function sameSpent(a: Spent | undefined, b: Spent | undefined): boolean {
  return a?.costUsd === b?.costUsd && a?.costUnknown === b?.costUnknown && a?.tokens === b?.tokens;
}
