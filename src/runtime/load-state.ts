/**
 * An execution's state outside a Run: read back from a store (the latest snapshot plus the tail,
 * F5), and one event appended to it under a lease (a resume or a timer for a body this process
 * does not hold).
 *
 * L1. State is folded only from a dense run of events: from 0, or from just after the snapshot.
 *     A gap there (a compacted log whose snapshot is gone, or was ignored because it is not bound
 *     to the audit chain, trust/snapshot-binding.ts B2, B4) is LogCorruptError naming the first
 *     missing sequence number, never a state folded short of the log (the fold stops at a gap,
 *     F2, and a replay from it would act on a past the log does not have).
 * L2. A run made from a state read back counts its snapshot policy from the snapshot the state
 *     was read from, not from the read (takeLoadedPolicy; snapshot-policy.ts): the events and bytes
 *     of the tail folded onto it count as appended since. Else a body resumed without its cache
 *     on every turn (on another fleet member, after a restart) appends a turn's few events per
 *     load and never reaches the policy, and each load folds a longer tail than the last.
 * L3. An append to a state read back (appendSpecs, from deliver) keeps that count too: its events
 *     join the tail, and the batch that crosses the run's policy carries a snapshot, as a run's
 *     would. Else input that wakes no body (a sender's retried message, a duplicate, while the
 *     body is parked on its receive) is appended load after load with no run to snapshot it.
 */
import type { Clock } from "../kernel/clock.ts";
import { isTerminalEvent, type Envelope } from "../kernel/events.ts";
import { ExecutionNotFoundError, LogCorruptError } from "../kernel/errors.ts";
import { fold, foldOnto } from "../fold/fold.ts";
import { initialState, type ExecutionState } from "../fold/state.ts";
import { indexChanges } from "../fold/index-changes.ts";
import { queueOfBatch } from "../fold/queue.ts";
import type { AppendBatch, Store } from "../store/spi.ts";
import { spentOf } from "../store/spent.ts";
import type { Journal } from "./journal.ts";
import type { EventSpec } from "./journal.ts";
import { SnapshotPolicy } from "./snapshot-policy.ts";

export async function loadState(store: Store, id: string): Promise<ExecutionState | undefined> {
  const snapshot = await store.loadSnapshot(id);
  const from = snapshot ? snapshot.seq + 1 : 0;
  const events = await store.read(id, from);
  if (!snapshot && events.length === 0) return undefined;
  const gap = events.findIndex((e, i) => e.seq !== from + i);
  if (gap >= 0) {
    // L1.
    throw new LogCorruptError(
      `execution "${id}" has no event ${from + gap}: its log was compacted and no snapshot that verifies covers the gap, so its state cannot be read`,
      { executionId: id, seq: from + gap },
    );
  }
  // The store parsed the snapshot for this call alone (S8): folded onto in place, not copied.
  const state = foldOnto(events, snapshot?.state, id);
  loads.set(state, { seq: snapshot ? snapshot.seq : -1, tail: events });
  return state;
}

/**
 * Where each state read back was read from (L2): the snapshot's sequence number and the tail
 * folded onto it, until a policy is made from them when first needed (L3, or a run's L2).
 */
const loads = new WeakMap<
  ExecutionState,
  { seq: number; tail: readonly Envelope[] } | SnapshotPolicy
>();

/** L2: the snapshot policy of `state`, read back, counted from the snapshot it was read from. */
function policyOf(state: ExecutionState): SnapshotPolicy | undefined {
  const load = loads.get(state);
  if (load === undefined || load instanceof SnapshotPolicy) return load;
  const policy = new SnapshotPolicy(load.seq, 0, undefined);
  for (const e of load.tail) policy.appended(approxJsonLength(e.payload));
  loads.set(state, policy);
  return policy;
}

/**
 * L3: `events` were just folded into `state`; the snapshot their batch carries when `state` was
 * read back and crossed the policy a run keeps (snapshot-policy.ts P1).
 */
function loadedSnapshotFor(
  state: ExecutionState,
  events: readonly Envelope[],
  snapshotEvery: number | undefined,
): AppendBatch["snapshot"] {
  const policy = policyOf(state);
  if (policy === undefined) return undefined;
  for (const e of events) policy.appended(approxJsonLength(e.payload));
  if (snapshotEvery === undefined) return undefined;
  return policy.snapshotOf(state, snapshotEvery, () => approxJsonLength(state));
}

/**
 * L2: the snapshot policy for a run made from `state`, read back: counted from the snapshot it
 * was read from, the tail and what was appended since as appended (P2); once, as only one run is
 * made from a state.
 */
export function takeLoadedPolicy(state: ExecutionState): SnapshotPolicy | undefined {
  const policy = policyOf(state);
  loads.delete(state);
  return policy;
}

export async function mustLoad(store: Store, id: string): Promise<ExecutionState> {
  const state = await loadState(store, id);
  if (!state) throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
  return state;
}

/**
 * The terminal event `id`'s log ended with, if it has ended: its last event, or the last before
 * the SUBJECT_ERASED facts an erasure appends after the end (E4). Two point reads, three when the
 * log records an erasure.
 */
export async function endEvent(store: Store, id: string): Promise<Envelope | undefined> {
  const head = await store.head(id);
  if (head < 0) return undefined;
  const last = (await store.read(id, head, 1))[0];
  if (!last) return undefined;
  if (isTerminalEvent(last)) return last;
  if (last.kind !== "SUBJECT_ERASED") return undefined;
  const tail = await store.read(id, Math.max(0, head - MAX_ERASURES), MAX_ERASURES + 1);
  return tail.reverse().find(isTerminalEvent);
}

/** The most SUBJECT_ERASED facts endEvent looks past (one per subject; an execution has one). */
const MAX_ERASURES = 8;

/**
 * About the length of `JSON.stringify(state)` (UTF-16 units), for the parked cache's byte bound
 * when a loaded state becomes a run: a walk that counts, a third of the time of the string it
 * would otherwise build and drop (a state is as large as its log's calls; 2 MB at 12,000).
 * Strings count their length, numbers 8, keys their length and their punctuation.
 */
export function approxStateBytes(state: ExecutionState): number {
  return approxJsonLength(state);
}

function approxJsonLength(v: unknown): number {
  if (typeof v === "string") return v.length + 2;
  if (typeof v !== "object" || v === null) return 8;
  let n = 2;
  if (Array.isArray(v)) {
    for (const x of v as unknown[]) n += approxJsonLength(x) + 1;
    return n;
  }
  const o = v as Record<string, unknown>;
  for (const k in o) n += k.length + 4 + approxJsonLength(o[k]);
  return n;
}

/** Sequence 0 folded alone: what an idempotent start compares with (flow, input, chain). */
export async function loadStart(store: Store, id: string): Promise<ExecutionState | undefined> {
  const first = (await store.read(id, 0, 1))[0];
  if (!first) return undefined;
  return fold(initialState(id), first);
}

/** Folds `spec` into `state` and appends it through the journal under `fence`. */
export function appendOne(
  journal: Journal,
  clock: Clock,
  state: ExecutionState,
  fence: number,
  spec: EventSpec,
): Promise<void> {
  return appendSpecs(journal, clock, state, fence, [spec]);
}

/**
 * Folds `specs` into `state` and appends them as one batch under `fence`, with `extras`; with
 * `snapshotEvery`, a state read back gets the snapshot policy a run keeps (L3).
 */
export async function appendSpecs(
  journal: Journal,
  clock: Clock,
  state: ExecutionState,
  fence: number,
  specs: readonly EventSpec[],
  extras: Pick<AppendBatch, "releaseLease" | "notice"> = {},
  snapshotEvery?: number,
): Promise<void> {
  const at = clock.now();
  const expectedSeq = state.seq + 1;
  const events = specs.map((spec, i): Envelope => ({
    executionId: state.executionId,
    seq: expectedSeq + i,
    kind: spec.kind,
    at,
    payload: spec.payload,
    meta: spec.kernel ? { kernel: true, fence } : { fence },
  }));
  const resourcesBefore = state._resources;
  for (const e of events) fold(state, e);
  // S24: a kernel batch (a cancel's CHILD_DONE, say) carries what was spent when it changed.
  const spent = state._resources === resourcesBefore ? undefined : spentOf(state._resources);
  const queue = queueOfBatch(events, state);
  const snapshot = loadedSnapshotFor(state, events, snapshotEvery);
  await journal.append({
    executionId: state.executionId,
    events,
    expectedSeq,
    fence,
    status: state.status,
    index: indexChanges(events, state),
    ...(spent === undefined ? {} : { spent }),
    ...(queue === undefined ? {} : { queue }),
    ...extras,
    ...(state._subject === undefined ? {} : { subject: state._subject }),
    ...(snapshot === undefined ? {} : { snapshot }),
  });
}
