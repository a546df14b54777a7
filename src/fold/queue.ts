/**
 * The fold of a queue's facts (schema 1.12.0, issue 26): an execution recorded with a queue is
 * `queued` (start.ts reads its mark into `_queue`) until a kernel-stamped EXECUTION_ADMITTED; a
 * kernel-stamped START_DEBOUNCED, folded only while it is queued, replaces its input and the
 * time before which it is not admitted.
 *
 * Invariants (tests cite QF1..QF3):
 * QF1. Only a kernel-stamped EXECUTION_ADMITTED leaves `queued` (to `pending`, and the next
 *      status by fold.ts F7); nothing else that folds while queued changes the status but a
 *      terminal event (fold.ts F7's exception for `queued`).
 * QF2. START_DEBOUNCED folds only while queued and kernel-stamped: `input` (when present)
 *      replaces the input, `notBeforeMs` the mark's.
 * QF3. EXECUTION_ADMITTED records when it was admitted and how long it waited (`waitedMs`) in
 *      `_queue`, which stays: the execution is of that queue until it ends.
 * QF4. A start whose queue mark carries `admittedAt` (a chain's successor, runtime/continuation.ts)
 *      is of that queue and admitted already: it is not `queued`, and holds the slot its
 *      predecessor held.
 */
import type { Envelope } from "../kernel/events.ts";
import type { QueueMark } from "../kernel/queue.ts";
import type { Handlers } from "./handler.ts";
import type { ExecutionState } from "./state.ts";

export const QUEUE_HANDLERS: Handlers = {
  EXECUTION_ADMITTED(s, p, e) {
    if (e.meta?.kernel !== true || s.status !== "queued" || !s._queue) return;
    s.status = "pending";
    s._queue.admittedAt = e.at;
    const waited = p.waitedMs;
    if (typeof waited === "number" && Number.isFinite(waited)) s._queue.waitedMs = waited;
  },
  START_DEBOUNCED(s, p, e) {
    if (e.meta?.kernel !== true || s.status !== "queued" || !s._queue) return;
    if (p.input !== undefined) s.input = p.input;
    const notBefore = p.notBeforeMs;
    if (typeof notBefore === "number" && Number.isFinite(notBefore)) {
      s._queue.notBeforeMs = notBefore;
    }
  },
};

/**
 * What a batch of `events`, just folded into `state`, tells the store of the execution's queue
 * (store S26..S28): its mark on sequence 0's batch, its new `notBeforeMs` on a START_DEBOUNCED's;
 * undefined for any other batch.
 */
export function queueOfBatch(
  events: readonly Envelope[],
  state: ExecutionState,
): QueueMark | undefined {
  const q = state._queue;
  if (!q) return undefined;
  const carries = events.some(
    (e) => e.seq === 0 || (e.kind === "START_DEBOUNCED" && e.meta?.kernel === true),
  );
  if (!carries) return undefined;
  const mark: QueueMark = { name: q.name, priority: q.priority };
  if (q.key !== undefined) mark.key = q.key;
  if (q.dedupe !== undefined) mark.dedupe = q.dedupe;
  if (q.notBeforeMs !== undefined) mark.notBeforeMs = q.notBeforeMs;
  return mark;
}
