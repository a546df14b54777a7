/**
 * What a fork records at its fork point (issues 20 and 21), on the fork's last copied envelope,
 * the one at the fork point, in the batch that writes the copy (runtime/fork.ts V6, V7): its own
 * budget (`meta.forkBudget`) and, unless the fork keeps its origin's clock, the moment it was
 * forked (`meta.forkedAt`).
 *
 * Invariants (tests cite F11, F12, F13):
 * F11. Only the fork point's envelope (its `meta.forkedFrom.seq` is its own seq) applies a
 *      `forkBudget`, after its kind's handler: by then `_budget` is the origin's at the fork
 *      point, grants the prefix negotiated included. It narrows `_budget` (kernel/resources.ts
 *      Q5): no limit is raised or dropped, whatever the stamp holds, so a forged stamp cannot
 *      lift a budget. What the prefix spent stays spent (`_resources`), so the fork has its
 *      budget less that.
 * F12. The fork point's envelope names the fork's origin (`_forkedFrom`), and its `forkedAt`
 *      is the fork's clock base: its deadline counts from it (`startedAt`), and so does the
 *      timeout of each step the prefix left running (`firstStartedAt`), so a fork does not start
 *      with its origin's time already spent. A fork's own events move nothing back.
 * F13. (schema 1.10.0) The fork point drops the notes (fold/steps.ts S4) of the steps the prefix
 *      left running: what the origin's attempts set going outside (a remote task) is the
 *      origin's, still live there, and the fork's own attempt must not stop or follow it.
 */
import type { Envelope } from "../kernel/events.ts";
import { isPlainObject } from "../kernel/json.ts";
import { narrowBudget, readBudget } from "../kernel/resources.ts";
import type { ExecutionState } from "./state.ts";

/** F11, F12, F13: what the fork point's envelope `e` records, applied once its own handler ran. */
export function atForkPoint(s: ExecutionState, e: Envelope): void {
  const meta: unknown = e.meta;
  if (!isPlainObject(meta)) return;
  const from = meta.forkedFrom;
  if (!isPlainObject(from) || from.seq !== e.seq) return;
  if (typeof from.executionId === "string") {
    s._forkedFrom = { executionId: from.executionId, seq: e.seq };
  }
  if (meta.forkBudget !== undefined) {
    const budget = readBudget(meta.forkBudget);
    if (budget) s._budget = narrowBudget(s._budget, budget);
  }
  for (const f of Object.values(s.frames)) delete f.notes; // F13
  const at = meta.forkedAt;
  if (typeof at === "number" && Number.isFinite(at) && at > s.startedAt) {
    s.startedAt = at;
    for (const f of Object.values(s.frames)) {
      if (f.kind !== "step" || f.status !== "started") continue;
      f.firstStartedAt = Math.max(f.firstStartedAt ?? at, at);
      delete f.attemptStartedAt;
    }
  }
}
