/**
 * Queues (issue 26): executions recorded with a queue wait in it, status `queued`, until its
 * admission gives them a slot. The store holds the slots, so the limits hold across every
 * process sharing it (a fleet on PostgreSQL, one process on SQLite or memory).
 *
 * Terms. An execution is "of queue q" when its sequence 0's batch carried `queue.name = q`. It
 * is "waiting" while its row's status is `queued` and its lease is free (none, released, or
 * expired at the caller's nowMs); it is "active" while its status is neither `queued` nor
 * terminal, or while it is `queued` with a live lease (admitted, its EXECUTION_ADMITTED not yet
 * appended: a crash there gives the slot back when the lease expires). Admission order: `priority`
 * ascending (lower first, default 0), then the time sequence 0 was appended, then the id.
 *
 * Contract (the conformance suite checks S26..S29):
 * S26. `admitQueued` takes, in one serialized step per queue, the leases (fence + 1, expiring at
 *      nowMs + ttlMs, owner `owner`) of waiting executions of the queue whose flow is in `flows`
 *      and whose `notBeforeMs` (if any) is at or before nowMs, in admission order, at most
 *      `limit`, such that afterwards the queue's active executions number at most
 *      `limits.concurrency` and those of any one key at most `limits.keyConcurrency` (each
 *      unlimited when absent). A waiting execution whose key is full is passed over, not waited
 *      on: it does not hold back other keys behind it. Concurrent admitters (other processes
 *      included) never together pass a limit. Executions without a key count toward the queue's
 *      concurrency only.
 * S27. A sequence 0 batch whose `queue.dedupe` equals that of a waiting or admitted-but-not-yet-
 *      appended (status `queued`) execution of the same queue is refused with
 *      QueueDuplicateError (details `{ existingId }`), writing nothing; once that one is admitted
 *      or ended the key is free again.
 * S28. A later batch's `queue` sets the row's `notBeforeMs` (a debounce moves it), in the batch's
 *      transaction and only if the batch is appended; its other fields are ignored there.
 * S29. `queueView` answers what a queue holds at nowMs: how many are active (in all and by key)
 *      and the waiting ones in admission order (at most `limit`), with their count in all.
 */
/** An execution's place in a queue, as its batches carry it (S26..S28). */
export interface QueueEntry {
  name: string;
  /** Its key for the queue's per-key concurrency (a user, a conversation). */
  key?: string;
  /** Lower is admitted first (default 0). */
  priority: number;
  /** While it is queued, no other execution of the queue with this key may be recorded (S27). */
  dedupe?: string;
  /** Not admitted before this time (runtime clock, epoch ms): a debounce's window. */
  notBeforeMs?: number;
}

/** A queue's limits (runtime option `queues`); every process sharing the store must agree. */
export interface QueueLimits {
  /** Executions of the queue active at once across every process (default: no limit). */
  concurrency?: number;
  /** Executions of one key active at once (default: no limit). */
  keyConcurrency?: number;
}

export interface AdmitOptions {
  queue: string;
  limits: QueueLimits;
  /** Only executions of these flows are admitted (the caller can drive them). */
  flows: readonly string[];
  limit: number;
  ttlMs: number;
  nowMs: number;
}

/** A lease an admission took (S26): the admitted execution's, held by the admitting owner. */
export interface Admitted {
  executionId: string;
  fence: number;
  expiresAtMs: number;
}

export interface QueuedExecution {
  executionId: string;
  flow: string;
  key?: string;
  priority: number;
  createdAtMs: number;
  notBeforeMs?: number;
}

export interface QueueView {
  queue: string;
  active: number;
  activeByKey: Record<string, number>;
  /** The waiting executions in admission order (position = index), at most the asked limit. */
  waiting: QueuedExecution[];
  waitingCount: number;
}

export interface QueueStore {
  /** S26: the leases of the executions admitted now. */
  admitQueued(owner: string, opts: AdmitOptions): Promise<Admitted[]>;
  /** S29 */
  queueView(queue: string, opts: { nowMs: number; limit: number }): Promise<QueueView>;
  /** The names of the queues that have waiting executions (for the admission duty and views). */
  queueNames(): Promise<string[]>;
}
