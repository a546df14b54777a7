/**
 * The store SPIs. Every store (memory, SQLite, PostgreSQL) implements `Store` and passes the one
 * conformance suite, `runStoreConformance`.
 *
 * Contract (the suite checks S1..S20):
 * S1. A batch is atomic: all of its events are appended, or none (also across a crash).
 * S2. A batch is appended only if `expectedSeq` is the execution's next sequence number, so of
 *     concurrent appends at one sequence number exactly one wins; the others get
 *     SequenceConflictError and write nothing.
 * S3. A batch is appended only if `fence` equals the fence of the execution's lease; otherwise
 *     FencedError and nothing is written. The first batch (sequence 0) needs a lease too.
 * S4. `appendMany` commits several executions' batches in one transaction (group commit); each
 *     batch succeeds or fails on its own, and a promise resolves only after its commit.
 * S5. Reads return what was committed, also after the store is closed and reopened.
 * S6. Lease acquire is a compare-and-set: it succeeds on a free, released or expired lease (judged
 *     with the caller's clock, the one that stamped it) or with the current fence named as
 *     `takeoverFence`, and every successful acquire increments the fence.
 * S7. Timer rows are written in the same transaction as the events they derive from, and
 *     `dueTimers(now)` returns those with `wakeAtMs <= now`, earliest first.
 * S8. `loadSnapshot` returns the saved snapshot with the highest `seq` (an older one never
 *     replaces a newer one), whether it was saved alone or with a batch. Each call returns a
 *     snapshot of its own, shared with nothing: the caller may change it (loadState folds the
 *     tail onto it in place, without a copy).
 * S9. A batch's `claimLease`, `releaseLease`, `snapshot` and `notice` take effect in its
 *     transaction, and only if the batch is appended.
 * S10. A notice is taken once: `takeNotices(owner)` returns the notices posted to `owner` that
 *     it has not returned before, oldest first, and no other owner's.
 * S11. `putSchedule` keeps a schedule's `fromMs` and cursor when it already exists (it updates
 *     the definition only); `advanceSchedule` never moves a cursor back.
 * S12. A chain's inbox is an append-only stream: `appendMessage` gives each message the stream's
 *     next sequence number (dense from 0, distinct under concurrent appends), and
 *     `readMessages` returns a topic's messages past a sequence number in order. Messages
 *     survive a reopen (S5).
 * S13. `deleteExecution(id)` removes the execution's events, snapshot, lease and timers in one
 *     transaction, all or nothing: afterwards `head(id)` is -1, `read` and `loadSnapshot` find
 *     nothing and `list` does not show it, also after a reopen. The inbox stream of its chain is
 *     not touched (it is the chain's, not one generation's), nor is any other execution.
 * S14. `compact(id, throughSeq, keepKinds)` deletes, in one transaction, the events with
 *     `seq <= throughSeq` whose kind is not in `keepKinds`, never the execution's last event (it
 *     anchors the head and the last-update time), and only when a snapshot with
 *     `seq >= throughSeq` is saved; otherwise it throws CompactionWithoutSnapshotError and deletes
 *     nothing. The remaining events keep their sequence numbers (the log has a gap); `head`,
 *     `list` and the next append (at head + 1) are unchanged; `read(id, from, limit)` returns the
 *     remaining events with `seq >= from`, in order, at most `limit` of them.
 * S15. A batch's `index.wakes` are timer rows of OTHER executions (a supervisor's wake rows,
 *     fold/index-changes.ts W1, W2), written in the batch's transaction and only if it is
 *     appended, like its own timer rows (S7); a terminal batch's clearing of its own rows never
 *     touches them, nor the wake rows others wrote for it, nor its own watch rows (`child:`,
 *     `cascade:` and `watch:` ids: fold/index-changes.ts isWakeId).
 * S16. `deferTimer(id, timerId, at)` moves that one row's wake time to `at` (later or earlier) if
 *     the row exists, and writes nothing if it does not: a row deleted meanwhile is not revived.
 * S19. Keys (`KeyStore`): `putKey(id, material)` stores `material` under `id` unless a key is stored
 *     there already, and returns the stored one either way (two concurrent puts agree on one);
 *     `getKey` reads it; `listKeys(prefix)` returns the ids that start with `prefix`, in order;
 *     `destroyKey(id)` deletes it so that its bytes are not left in the store's files (SQLite:
 *     `secure_delete` and a WAL checkpoint; PostgreSQL: the row is deleted and the table vacuumed),
 *     and says whether it existed and, in `unconfirmed`, why it could not confirm that no copy of
 *     the bytes is left (a reader holding an older snapshot of the data past the store's wait);
 *     a destroy of an id already gone still scrubs, so a later call completes one unconfirmed.
 *     Keys survive a reopen (S5).
 * S20. A batch whose events are all SUBJECT_ERASED is appended to an ended log too (E4): the
 *     terminal status check (append-check.ts) does not refuse it; the fence and sequence checks do.
 * S21, S22 (forks by origin, the fleet's members) are stated in spi-records.ts.
 * S23. A schedule is paused or not (`paused`, false when put first); `putSchedule` keeps it as it
 *     keeps the cursor (S11). `setSchedulePaused(name, paused, cursorMs)` sets it and, in the same
 *     write, moves the cursor to `cursorMs` if that is later (a resume skips what it missed);
 *     it answers whether the schedule exists, and writes nothing when it does not.
 * S24, S25 (the list's columns, its sorts, filters and keyset pages) are stated in spi-list.ts.
 * S26..S29 (queues) are stated in spi-queues.ts, S30..S34 (rate limiters) in spi-limiters.ts.
 *
 * A store shared by a fleet of processes also implements `FleetStore` (S17, S18, below), checked by
 * `runFleetConformance`.
 */
import type { Envelope, EventKind, ExecutionStatus } from "../kernel/events.ts";
import type { ErrorData, LoomError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { Snapshot } from "../fold/state.ts";
import type { IndexChanges } from "../fold/index-changes.ts";
import type { ForkStore, MemberStore } from "./spi-records.ts";
import type { InboxStore } from "./spi-inbox.ts";

export type { ForkLink, ForkStore, HeldLease, Member, MemberStore } from "./spi-records.ts";
import type { Spent } from "./spent.ts";
import type { ListQuery } from "./spi-list.ts";
import type { QueueEntry, QueueStore } from "./spi-queues.ts";
import type { LimiterStore } from "./spi-limiters.ts";

export type { Spent } from "./spent.ts";
export type { InboxMessage, InboxStore } from "./spi-inbox.ts";
export type { ListQuery, ListSort } from "./spi-list.ts";
export type * from "./spi-queues.ts";
export type * from "./spi-limiters.ts";

export interface AppendBatch {
  executionId: string;
  /** Dense, starting at `expectedSeq`. */
  events: Envelope[];
  expectedSeq: number;
  fence: number;
  /** The execution's status after these events (the runtime folds before it appends). */
  status: ExecutionStatus;
  /** The flow's name; read from the batch that holds sequence 0. */
  flow?: string;
  /** The principal that started the execution (its folded `_principal`); read like `flow`. */
  principal?: string;
  /** What the execution has spent after these events (S24), only when they changed it. */
  spent?: Spent;
  /**
   * Its queue (spi-queues.ts): on sequence 0's batch, the place it waits in (S26, S27); on a
   * later batch of a queued execution, a new `notBeforeMs` (S28).
   */
  queue?: QueueEntry;
  index?: IndexChanges;
  /**
   * Creates the execution's lease in the same transaction (a start needs no separate one): only
   * when no lease row exists and the batch's fence is 1; otherwise the batch is fenced.
   */
  claimLease?: { owner: string; expiresAtMs: number };
  /** Releases the lease after the append, in the same transaction, if `owner` holds it at `fence`. */
  releaseLease?: string;
  /** A snapshot of the state after this batch, saved in the same transaction (S8 applies). */
  snapshot?: { seq: number; stateJson: string };
  /**
   * Posts a notice to another owner in the same transaction (S10): a cancel tells the owner it
   * fenced out to stop its in-flight work.
   */
  notice?: { owner: string; kind: NoticeKind };
  /**
   * The data subject whose data the execution holds (its folded `_subject`): the sealing store
   * (trust/sealed-store.ts) seals the batch with the subject's key and removes this field, so a
   * store never sees it.
   */
  subject?: string;
}

export type NoticeKind = "cancel";

export interface Notice {
  executionId: string;
  kind: NoticeKind;
  /** The time of the batch that posted it (the runtime clock). */
  atMs: number;
}

export type AppendOutcome = { ok: true } | { ok: false; error: LoomError };

export interface ExecutionSummary {
  executionId: string;
  flow: string;
  status: ExecutionStatus;
  /** The last sequence number. */
  head: number;
  createdAtMs: number;
  updatedAtMs: number;
  /** The principal that started it (S24), when one did. */
  principal?: string;
  /** What it has spent (S24), each field once some batch reported it; `costUnknown` (only ever
   * true): some call could not be priced, so `costUsd` is a lower bound. */
  costUsd?: number;
  costUnknown?: boolean;
  tokens?: number;
  /** The queue it was recorded in (spi-queues.ts), when it was. */
  queue?: string;
  /**
   * Why the log cannot be read (LogCorruptError), where the lister asked (log-errors.ts); a
   * store's own `list` never sets it.
   */
  error?: ErrorData;
}

export interface EventStore {
  appendMany(batches: readonly AppendBatch[]): Promise<AppendOutcome[]>;
  /** Events with `seq >= fromSeq`, in order; at most `limit` of them when it is given. */
  read(executionId: string, fromSeq?: number, limit?: number): Promise<Envelope[]>;
  /** The last sequence number, or -1 when there is no log. */
  head(executionId: string): Promise<number>;
  list(query?: ListQuery): Promise<ExecutionSummary[]>;
}

export interface SnapshotStore {
  /** Copies `snapshot` before it first yields: the caller goes on changing the state it passed. */
  saveSnapshot(executionId: string, snapshot: Snapshot): Promise<void>;
  loadSnapshot(executionId: string): Promise<Snapshot | undefined>;
}

export interface Lease {
  executionId: string;
  /** Undefined when released. */
  owner: string | undefined;
  fence: number;
  expiresAtMs: number;
}

export interface AcquireOptions {
  ttlMs: number;
  nowMs: number;
  /** Take the lease from a live-looking owner known to be dead: succeeds only at this fence. */
  takeoverFence?: number;
}

export interface LeaseStore {
  /** The new lease, or undefined when another owner holds an unexpired one. */
  acquireLease(
    executionId: string,
    owner: string,
    opts: AcquireOptions,
  ): Promise<Lease | undefined>;
  /** False when the lease is no longer this owner's at this fence. */
  renewLease(
    executionId: string,
    owner: string,
    fence: number,
    opts: AcquireOptions,
  ): Promise<boolean>;
  releaseLease(executionId: string, owner: string, fence: number): Promise<void>;
  getLease(executionId: string): Promise<Lease | undefined>;
}

export interface DueTimer {
  executionId: string;
  timerId: string;
  wakeAtMs: number;
}

export interface TimerStore {
  dueTimers(nowMs: number, limit: number): Promise<DueTimer[]>;
  /** The earliest wake time of any timer row, or undefined when there is none. */
  nextWakeAt(): Promise<number | undefined>;
  deleteTimer(executionId: string, timerId: string): Promise<void>;
  /** Moves an existing timer row to `wakeAtMs` (S16); a row that is gone stays gone. */
  deferTimer(executionId: string, timerId: string, wakeAtMs: number): Promise<void>;
}

export interface NoticeStore {
  /**
   * The notices posted to `owner` since it last took them, oldest first, and forgets them (S10).
   * Called often by every busy runtime, so an empty answer must cost a read, not a write.
   */
  takeNotices(owner: string): Promise<Notice[]>;
}

/** A cron schedule (runtime.schedule): one execution per occurrence, with a derived id. */
export interface Schedule {
  name: string;
  flow: string;
  cron: string;
  /** The IANA time zone the cron expression is read in. */
  timezone: string;
  input?: Json;
  /** Occurrences after this time (the runtime clock) are started: when it was first put. */
  fromMs: number;
  /** The latest occurrence started, or `fromMs` (a hint: starts are idempotent by id). */
  cursorMs: number;
  /** A paused schedule starts no occurrence (S23). */
  paused: boolean;
}

export interface ScheduleStore {
  /** Creates the schedule, or updates its definition keeping `fromMs`, the cursor (S11) and the pause (S23). */
  putSchedule(schedule: Omit<Schedule, "cursorMs" | "paused">): Promise<void>;
  listSchedules(): Promise<Schedule[]>;
  /** Moves the cursor to `cursorMs` if that is later (S11). */
  advanceSchedule(name: string, cursorMs: number): Promise<void>;
  deleteSchedule(name: string): Promise<void>;
  /** Pauses or resumes it, moving the cursor to `cursorMs` if later (S23); false: no such schedule. */
  setSchedulePaused(name: string, paused: boolean, cursorMs: number): Promise<boolean>;
}

/** What retention and compaction remove (S13, S14). */
export interface RetentionStore {
  /** Removes the execution whole (S13); true when it had a log. */
  deleteExecution(executionId: string): Promise<boolean>;
  /**
   * Deletes the events at or below `throughSeq` whose kind is not in `keepKinds`, the last event
   * excepted, when a snapshot at or past `throughSeq` is saved (S14). Returns how many it deleted.
   */
  compact(
    executionId: string,
    throughSeq: number,
    keepKinds: readonly EventKind[],
  ): Promise<number>;
}

/**
 * Key material the payload codec keeps beside the log (trust/): a data subject's key, and the
 * index of which executions hold the subject's data (S19). Material is opaque text.
 */
export interface KeyStore {
  putKey(keyId: string, material: string): Promise<string>;
  getKey(keyId: string): Promise<string | undefined>;
  listKeys(prefix: string): Promise<string[]>;
  destroyKey(keyId: string): Promise<KeyDestruction>;
}

/** What `destroyKey` did (S19). */
export interface KeyDestruction {
  /** Whether a key was stored under the id (it is deleted now). */
  existed: boolean;
  /**
   * Set when the store could not confirm that no copy of a destroyed key's bytes is left in its
   * files, and why, in words a person acts on. Absent when the scrub is done.
   */
  unconfirmed?: string;
}

export interface Store
  extends
    EventStore,
    KeyStore,
    RetentionStore,
    SnapshotStore,
    LeaseStore,
    TimerStore,
    NoticeStore,
    ScheduleStore,
    InboxStore,
    ForkStore,
    MemberStore,
    QueueStore,
    LimiterStore {
  /** A short name for messages and benchmarks ("memory", "sqlite"). */
  readonly kind: string;
  close(): Promise<void>;
}

/** Test hooks a store may accept so the conformance suite can inject faults. */
export interface StoreHooks {
  /** Called inside the append transaction, after the writes and before the commit. */
  beforeCommit?: (batches: readonly AppendBatch[]) => void;
}

/** What a store shared by a fleet of processes adds (PostgreSQL): claiming work, and waking owners. */
export interface FleetStore {
  /**
   * S17. Claims up to `limit` runnable executions of the named flows for `owner`: status pending or
   * running, with no live lease (none, released, or expired at nowMs), skipping rows another claimer
   * has locked (FOR UPDATE SKIP LOCKED); each one's lease is taken (fence + 1, expires at nowMs + ttlMs)
   * in the same transaction. Two concurrent claimers never get the same execution.
   */
  claimRunnable(
    owner: string,
    opts: { flows: readonly string[]; limit: number; ttlMs: number; nowMs: number },
  ): Promise<Lease[]>;
  /**
   * S18. Calls `onWake` when another process (or this one) does something a fleet member should act on
   * without waiting for its poll: an execution became runnable (an append of a batch whose status is
   * pending or running while no lease is held, a lease released or a batch's releaseLease), a timer row was
   * written (its wake time), a notice was posted (its owner), a message was appended (its chain).
   * Delivery is best effort (LISTEN/NOTIFY on one dedicated connection, reconnecting if it drops);
   * the returned function unsubscribes.
   */
  listen(onWake: (wake: FleetWake) => void): Promise<() => Promise<void>>;
}

export type FleetWake =
  | { kind: "runnable"; executionId: string }
  | { kind: "timer"; executionId: string; wakeAtMs: number }
  | { kind: "notice"; owner: string; executionId: string }
  | { kind: "message"; chainId: string }
  /** A queue may admit: an execution was recorded in it, or one of it ended or let its lease go. */
  | { kind: "queue"; queue: string };

/** Whether `store` can claim work and wake owners (a fleet's shared store). */
export function isFleetStore(store: Store): store is Store & FleetStore {
  return (
    "claimRunnable" in store &&
    typeof store.claimRunnable === "function" &&
    "listen" in store &&
    typeof store.listen === "function"
  );
}
