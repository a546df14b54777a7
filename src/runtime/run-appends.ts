/**
 * What a run appends, and how: each batch of events is folded into the run's state as it is
 * queued, handed to the journal (journal.ts, the group commit shared by every run of the
 * runtime) with the run's fence, its index changes and, past the policy, a snapshot; a step's
 * start waits for the next group commit. A Run (run.ts) owns one and delegates `enqueue`,
 * `enqueueDetached`, `deferStart` and `takeStart` to it; the commit is the Run's to act on.
 *
 * Invariants (numbered as in run.ts; R4, R5 and R9 are kept here whole, R1 in part):
 * R1. Every event is folded into the state when it is queued, and each wait it settles is told
 *     the event's sequence number (run-scopes.ts wakes the waiter once that is committed).
 * R4. Nothing is appended after a terminal event, and nothing after the run stopped.
 * R5. Every append carries the run's fence; a refused append stops the run (a zombie writes
 *     nothing).
 * R9. A step's start is written at the next group commit if the step is still running, else
 *     inside its settling event (see deferStart).
 */
import type { Envelope } from "../kernel/events.ts";
import { isTerminalStatus } from "../kernel/events.ts";
import { InvariantViolation } from "../kernel/errors.ts";
import { jsonText, type Json } from "../kernel/json.ts";
import type { Clock } from "../kernel/clock.ts";
import { fold } from "../fold/fold.ts";
import { indexChanges } from "../fold/index-changes.ts";
import { queueOfBatch } from "../fold/queue.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { AppendBatch } from "../store/spi.ts";
import { sameSpent, spentOf } from "../store/spent.ts";
import type { EventSpec, Journal } from "./journal.ts";
import { takeLoadedPolicy } from "./load-state.ts";
import { EVENT_BYTES, SnapshotPolicy } from "./snapshot-policy.ts";

/**
 * `{ ...base, ...more }`, made with Object.assign: V8 (Node 20) serialises an object made by a
 * leading spread three to five times slower (about 5 µs against 1.5 for a step's settling
 * payload), and these payloads are serialised on every step.
 */
export function merged(
  base: { [k: string]: Json } | undefined,
  more: { [k: string]: Json },
): { [k: string]: Json } {
  return Object.assign(Object.assign({}, base), more);
}

/**
 * A step's start recorded at the time of the event that carries it leaves `startedAt` out: the
 * fold reads a missing one as the event's time (fold/steps.ts, schema 1.1.0), so it says nothing.
 * Any other payload is returned as it is.
 */
function startedNow(payload: Json, at: number): Json {
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) return payload;
  if (payload.startedAt !== at) return payload;
  const out: { [k: string]: Json } = {};
  for (const k of Object.keys(payload)) if (k !== "startedAt") out[k] = payload[k] as Json;
  return out;
}

/** What the appends need of the runtime (RunHost has it). */
export interface AppendHost {
  readonly clock: Clock;
  readonly journal: Journal;
  readonly ownerId: string;
  /** The fewest events between snapshots (snapshot-policy.ts P1). */
  readonly snapshotEvery: number;
}

/** The run whose appends these are, as they see it (Run implements it). */
export interface AppendingRun {
  readonly id: string;
  readonly state: ExecutionState;
  readonly fence: number;
  readonly live: boolean;
  readonly active: boolean;
  readonly stopError: Error | undefined;
  /** Rough size of what the run holds in memory: each appended event adds its estimate. */
  approxBytes: number;
  stop(error: Error): void;
}

/** Who hears which waits each appended event settles (the run's scopes, run-scopes.ts). */
export interface AppendListener {
  /** Event `seq` was just folded: a wait it settled is released once `seq` commits (R1). */
  noteSettled(seq: number): void;
}

export class RunAppends {
  /** When a snapshot rides a batch (snapshot-policy.ts P1, P2). */
  private readonly snapshots: SnapshotPolicy;
  /**
   * Steps running whose STEP_STARTED is not written yet (R9): the start's payload, `startedAt`
   * included, owned by whichever takes it (the writer or the settling event).
   */
  private readonly pendingStarts = new Map<string, { [k: string]: Json }>();

  constructor(
    private readonly run: AppendingRun,
    private readonly host: AppendHost,
    private readonly settles: AppendListener,
    /** The run's commit: everything through `seq` is durable (Run.afterCommit). */
    private readonly committed: (seq: number) => void,
  ) {
    // load-state.ts L2: a state read back counts from its snapshot, its tail as appended since.
    this.snapshots = takeLoadedPolicy(run.state) ?? new SnapshotPolicy(run.state.seq, 0, 0);
  }

  /** Folds and queues events; resolves when they are committed (R1, R4, R5). */
  enqueue(
    specs: readonly EventSpec[],
    extras?: Pick<AppendBatch, "claimLease"> & { release?: true },
  ): Promise<void> {
    const run = this.run;
    if (!run.live) return Promise.reject(run.stopError ?? this.endedError());
    const state = run.state;
    if (isTerminalStatus(state.status)) return Promise.reject(this.endedError());
    const at = this.host.clock.now();
    const expectedSeq = state.seq + 1;
    const resourcesBefore = state._resources;
    const events: Envelope[] = specs.map((s, i) => ({
      executionId: run.id,
      seq: expectedSeq + i,
      kind: s.kind,
      at,
      payload: s.kind.startsWith("STEP_") ? startedNow(s.payload, at) : s.payload,
      meta: s.kernel ? { kernel: true, fence: run.fence } : { fence: run.fence },
    }));
    for (const e of events) {
      fold(state, e);
      this.settles.noteSettled(e.seq);
      // An estimate for the cache's byte bound and the snapshot policy (UTF-16 length, P2).
      const payloadBytes = jsonText(e.payload).length;
      run.approxBytes += payloadBytes + EVENT_BYTES;
      this.snapshots.appended(payloadBytes);
    }
    if (state.seq !== expectedSeq + events.length - 1) {
      throw new InvariantViolation(`fold of ${run.id} did not advance over its own events`);
    }
    const lastSeq = state.seq;
    const batch = this.batch(events, expectedSeq, extras);
    // S24: what was spent rides the batch only when its events changed it (the fold replaces
    // `_resources` whenever it adds to it, so an unchanged reference is an unchanged total).
    if (state._resources !== resourcesBefore) {
      const spent = spentOf(state._resources);
      if (!sameSpent(spent, spentOf(resourcesBefore)) && spent) batch.spent = spent;
    }
    return this.host.journal.append(batch).then(
      () => this.committed(lastSeq),
      (e: unknown) => {
        const error = e instanceof Error ? e : new Error(String(e));
        run.stop(error);
        throw error;
      },
    );
  }

  /** The batch the journal gets for `events`, just folded (R5: under the run's fence). */
  private batch(
    events: Envelope[],
    expectedSeq: number,
    extras: (Pick<AppendBatch, "claimLease"> & { release?: true }) | undefined,
  ): AppendBatch {
    const state = this.run.state;
    const batch: AppendBatch = {
      executionId: this.run.id,
      events,
      expectedSeq,
      fence: this.run.fence,
      status: state.status,
      flow: state.flow,
      // The state after the batch: a terminal one also writes the supervisors' wake rows.
      index: indexChanges(events, state),
    };
    if (extras?.claimLease) batch.claimLease = extras.claimLease;
    if (state._principal !== undefined) batch.principal = state._principal;
    const queue = queueOfBatch(events, state);
    if (queue) batch.queue = queue;
    if (state._subject !== undefined) batch.subject = state._subject;
    if (isTerminalStatus(state.status) || extras?.release) {
      batch.releaseLease = this.host.ownerId;
    }
    const snapshot = this.snapshots.snapshotOf(state, this.host.snapshotEvery, this.stateBytes);
    if (snapshot) batch.snapshot = snapshot;
    return batch;
  }

  /** The run's size estimate, for a policy that does not know its last snapshot's (P2). */
  private readonly stateBytes = (): number => this.run.approxBytes;

  /**
   * R9: a new step's STEP_STARTED is written at the next group commit only if the step is still
   * running then; a step that settles first writes one event, its STEP_COMPLETED or STEP_FAILED,
   * carrying the start (`scope`, `name`, `input`, `startedAt`). A long step's start is durable
   * within one turn of the event loop; a fast step costs one event instead of two.
   */
  deferStart(callId: string, payload: { [k: string]: Json }): void {
    this.pendingStarts.set(callId, merged(payload, { startedAt: this.host.clock.now() }));
    this.host.journal.atNextFlush(this.startsWriter);
  }

  /** One writer per run (the journal keeps a set of them): made once, not per step. */
  private readonly startsWriter = (): void => this.writeStarts();

  /**
   * The start of `callId` to fold into its settling event, if it was never written: a fresh
   * object the caller owns (it adds the settling fields to it).
   */
  takeStart(callId: string): { [k: string]: Json } | undefined {
    const pending = this.pendingStarts.get(callId);
    if (pending) this.pendingStarts.delete(callId);
    return pending;
  }

  /** Starts taken by neither the writer nor a settling event yet (Run.quiesced waits for 0). */
  get pendingStartCount(): number {
    return this.pendingStarts.size;
  }

  private writeStarts(): void {
    if (!this.run.active || this.pendingStarts.size === 0) return;
    const starts = [...this.pendingStarts.values()];
    this.pendingStarts.clear();
    this.enqueueDetached(starts.map((payload) => ({ kind: "STEP_STARTED", payload })));
  }

  /** Queues events without waiting; a failure stops the run. */
  enqueueDetached(specs: readonly EventSpec[]): void {
    this.enqueue(specs).catch(() => undefined);
  }

  private endedError(): Error {
    const { id, state } = this.run;
    return new InvariantViolation(
      `execution "${id}" has ended (${state.status}); its flow body made a call after it returned`,
    );
  }
}
