/**
 * `runtime.compact(id)`: an execution's log loses the events its latest snapshot covers, except
 * the pinned kinds (ADR 0109 D6: EXECUTION_CONTINUED is pinned, so a compacted predecessor still
 * names its successor).
 *
 * Invariants (tests cite P1..P4):
 * P1. Compaction runs only through a saved snapshot (store S14), so what loading reads (the
 *     snapshot and the tail after it) is never deleted: load, recovery, getState, resume and a
 *     cached run's re-check give the same state after a compaction as before.
 * P2. Pinned kinds stay: EXECUTION_STARTED (sequence 0: identity, chain and principal, which
 *     authorization and routing read), the terminal kinds (an outcome, a successor's name),
 *     QUOTA_EXCEEDED, STATE_RESTORED (a restore stays auditable), and the kinds the caller
 *     adds. The last event stays too (S14).
 * P3. Sequence numbers never move: a compacted log has a gap. A fold of a whole gapped log stops
 *     at the gap (the fold ignores an envelope that is not the next, F2), so no reader folds a
 *     whole log: state is snapshot plus tail (loadState); readLog returns the gapped log as it
 *     is; a fork point whose prefix is not dense from 0 is CompactedForkPointError (fork.ts V4).
 * P4. Every refusal (an unknown kind, no log, no snapshot) comes before anything is deleted.
 */
import {
  CompactionWithoutSnapshotError,
  ExecutionNotFoundError,
  InvalidInputError,
} from "../kernel/errors.ts";
import { isEventKind, TERMINAL_KINDS, type EventKind } from "../kernel/events.ts";
import type { Store } from "../store/spi.ts";
import { loadState } from "./load-state.ts";
import type { CallerOptions } from "./runtime-options.ts";

/** P2: what every compaction keeps. */
export const PINNED_KINDS: readonly EventKind[] = [
  "EXECUTION_STARTED",
  ...[...TERMINAL_KINDS].filter(isEventKind),
  "QUOTA_EXCEEDED",
  // Who restored what, and onto which flow, stays auditable (the snapshot holds its effect).
  "STATE_RESTORED",
  // An erasure is a fact about the log that must outlive any compaction (issue 10).
  "SUBJECT_ERASED",
];

export interface CompactOptions extends CallerOptions {
  /** Kinds kept besides PINNED_KINDS. */
  keepKinds?: readonly EventKind[];
  /**
   * Saves a snapshot of the state at the log's head first (snapshot plus tail, folded here), so
   * the compaction reaches the head. Default false: through the latest snapshot already saved.
   */
  snapshotFirst?: boolean;
}

export interface Compaction {
  /** The snapshot's sequence number: nothing after it was touched. */
  throughSeq: number;
  /** How many events were deleted. */
  removed: number;
}

/** The pinned kinds plus `extra`, or InvalidInputError naming what is not a kind (P4). */
export function keptKinds(extra: unknown): EventKind[] {
  if (extra === undefined) return [...PINNED_KINDS];
  if (!Array.isArray(extra)) throw new InvalidInputError("keepKinds must be an array of kinds");
  const kept = new Set<EventKind>(PINNED_KINDS);
  for (const k of extra as unknown[]) {
    if (!isEventKind(k)) {
      throw new InvalidInputError(`keepKinds: ${JSON.stringify(k)} is not an event kind`);
    }
    kept.add(k);
  }
  return [...kept];
}

/** Compacts `id` through its latest snapshot, keeping the pinned kinds (P1..P4). */
export async function compactLog(
  store: Store,
  id: string,
  options: Pick<CompactOptions, "keepKinds" | "snapshotFirst">,
): Promise<Compaction> {
  const keep = keptKinds(options.keepKinds);
  if (options.snapshotFirst === true) {
    const state = await loadState(store, id);
    if (state && state.seq >= 0) await store.saveSnapshot(id, { seq: state.seq, state });
  }
  const snapshot = await store.loadSnapshot(id);
  if (!snapshot) {
    if ((await store.head(id)) < 0) {
      throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
    }
    throw new CompactionWithoutSnapshotError(
      `execution "${id}" has no snapshot to compact through (pass snapshotFirst to save one)`,
      { executionId: id },
    );
  }
  const removed = await store.compact(id, snapshot.seq, keep);
  return { throughSeq: snapshot.seq, removed };
}
