/**
 * A fork's own budget (issue 20): `runtime.fork(id, atSequence, newId, { budget })` records it as
 * `meta.forkBudget` on the fork's last copied envelope, the one at the fork point, in the batch
 * that writes the copy (runtime/fork.ts V6).
 *
 * Invariants (tests cite F11):
 * F11. Only the fork point's envelope (its `meta.forkedFrom.seq` is its own seq) applies a
 *      `forkBudget`, after its kind's handler: by then `_budget` is the origin's at the fork
 *      point, grants the prefix negotiated included. It narrows `_budget` (kernel/resources.ts
 *      Q5): no limit is raised or dropped, whatever the stamp holds, so a forged stamp cannot
 *      lift a budget. What the prefix spent stays spent (`_resources`), so the fork has its
 *      budget less that.
 */
import type { Envelope } from "../kernel/events.ts";
import { isPlainObject } from "../kernel/json.ts";
import { narrowBudget, readBudget } from "../kernel/resources.ts";
import type { ExecutionState } from "./state.ts";

/** F11: the fork point's `forkBudget`, applied to `s` once `e`'s own handler ran. */
export function narrowAtForkPoint(s: ExecutionState, e: Envelope): void {
  const meta: unknown = e.meta;
  if (!isPlainObject(meta) || meta.forkBudget === undefined) return;
  const from = meta.forkedFrom;
  if (!isPlainObject(from) || from.seq !== e.seq) return;
  const budget = readBudget(meta.forkBudget);
  if (budget) s._budget = narrowBudget(s._budget, budget);
}
