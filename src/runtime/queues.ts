/**
 * Queues in the runtime (issue 26): a start with a queue (its own, or its flow's) is recorded
 * `queued`; the admission duty gives it a slot when the queue's limits allow (store S26), across
 * every process sharing the store; only then does its body run.
 *
 * Invariants (tests cite QU1..QU6):
 * QU1. A queued start writes sequence 0 with the queue's mark (status `queued`) and releases its
 *      lease in the same batch: nothing of its body runs before it is admitted.
 * QU2. The admission duty asks the store, for each queue with waiting executions, for at most the
 *      room this runtime has (`maxActive`) of the flows it has; each admitted execution gets its
 *      EXECUTION_ADMITTED appended under the lease the admission took, then is driven here. One
 *      that is no longer queued when loaded (cancelled meanwhile) gets its lease back untouched.
 *      The room and the lease's time it asks with are whole numbers, whatever `maxActive` and
 *      `leaseTtlMs` are (a runtime made with `maxActive: 2.5` or `leaseTtlMs: 20000.5` had every
 *      admission refused by the store: its queued executions waited forever).
 * QU3. A crash between admission and the EXECUTION_ADMITTED append leaves the execution queued
 *      under a lease that expires: it holds its slot until then (S26), and is admitted again
 *      after; nothing ran.
 * QU4. A queue's limits are the runtime's `queues` option (every process sharing the store must
 *      agree); a queue it does not name is unlimited. Limits, a start's queue options and a
 *      flow's are checked before anything is recorded (InvalidInputError, also for a flow's
 *      `key(input)` that throws, which was its raw TypeError). A key or dedupe key is
 *      well-formed Unicode: the SQL stores keep UTF-8, which turns every lone surrogate into
 *      U+FFFD, so on PostgreSQL "\ud800" and "\udc00" were one key (one's dedupe refused the
 *      other's start, and they shared a key's slots) while the memory store kept them apart.
 * QU5. The duty is asked for again when a queued start is recorded here, when an execution of a
 *      queue ends here (a slot frees), at the earliest `notBeforeMs` it saw waiting, and on a
 *      fleet's queue wake; a lost ask costs a poll interval.
 */
import { isLoomError } from "../kernel/errors.ts";
import type { Admitted } from "../store/spi.ts";
import { appendSpecs, loadState } from "./load-state.ts";
import { drive } from "./runtime-core.ts";
import type { RuntimeState } from "./runtime-state.ts";

/** The most executions one admission takes for this runtime when `maxActive` does not bound it. */
const ADMIT_BATCH = 50;

/** QU2: the admission duty; the ids it admitted and drives. */
export async function admitQueued(s: RuntimeState): Promise<string[]> {
  s.assertOpen();
  const admitted: string[] = [];
  if (s.flows.size === 0) return admitted;
  const names = await s.store.queueNames();
  for (const queue of names) {
    // Whole numbers for the store (S26), whatever maxActive and leaseTtlMs are (QU2).
    const room = Math.ceil(Math.min(ADMIT_BATCH, s.maxActive - s.activeRuns()));
    if (room <= 0 || s.closed) return admitted;
    const leases = await s.store.admitQueued(s.ownerId, {
      queue,
      limits: s.queues[queue] ?? {},
      flows: [...s.flows.keys()],
      limit: room,
      ttlMs: Math.ceil(s.leaseTtlMs),
      nowMs: s.clock.now(),
    });
    for (const lease of leases) {
      const ok = await s.tasks
        .exclusive(lease.executionId, () => admitOne(s, queue, lease))
        .catch((e: unknown) => {
          // Cancelled or taken over between the admission and its record: not this one's.
          const benign = ["LOOM_RUNTIME_CLOSED", "LOOM_EXECUTION_ENDED", "LOOM_FENCED"];
          if (!benign.some((code) => isLoomError(e, code))) s.report(e);
          return false;
        });
      if (ok) admitted.push(lease.executionId);
    }
  }
  return admitted;
}

/** QU2: EXECUTION_ADMITTED under the admission's lease, then the body runs here. */
async function admitOne(s: RuntimeState, queue: string, lease: Admitted): Promise<boolean> {
  const id = lease.executionId;
  let driven = false;
  try {
    const where = s.options.recoverWhere;
    if (s.closed || s.runs.get(id)?.live || (where && !where(id))) return false;
    const state = await loadState(s.store, id);
    if (state?.status !== "queued") return false;
    const waitedMs = Math.max(0, s.clock.now() - state.startedAt);
    await appendSpecs(s.journal, s.clock, state, lease.fence, [
      { kind: "EXECUTION_ADMITTED", payload: { queue, waitedMs }, kernel: true },
    ]);
    driven = drive(s, state, { ...lease, owner: s.ownerId });
    return driven;
  } finally {
    if (!driven) await s.leases.release(id, lease.fence);
  }
}
