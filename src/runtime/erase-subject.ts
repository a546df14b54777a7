/**
 * eraseSubject: makes a data subject's payloads unrecoverable while every log keeps its shape
 * (issue 10; docs/trust.md). The subject's payloads are sealed with the subject's own key
 * (trust/sealed-store.ts V2), so erasure destroys that key (crypto-shredding): no event is
 * rewritten, so each log still folds and its audit chain still verifies (trust/audit.ts A3).
 *
 * Invariants (tests cite X1..X6):
 * X1. Live first: every execution that holds the subject's data and has not ended is cancelled
 *     (a fact in its log) before anything is destroyed; if one cannot be ended, SubjectLiveError
 *     and nothing is destroyed.
 * X2. The fact before the key: each log gets a kernel-stamped SUBJECT_ERASED { subject } (store
 *     S20 admits it after the end; fold F4) before the key is destroyed, so a crash in between
 *     leaves a log that says so and a key that a second call destroys.
 * X3. Idempotent: a log that already records the erasure gets no second fact; a second call
 *     after a complete one destroys nothing more and reports the same executions.
 * X4. The executions are found through the subject index written before each one's first event
 *     (sealed-store V6): successors, children and forks carry the subject, so they are indexed
 *     too. An index entry counts only when the log's sequence 0 is sealed with the subject's key
 *     (an entry whose first batch failed names someone else's log, or none). The index is read
 *     again after the cancels, until no new execution appears (one started meanwhile).
 * X5. After its fact, each log gets a redacted snapshot, built from an allow-list of identity and
 *     accounting (erase-redacted.ts X5a..X5c), never by deleting what is known to hold data: no
 *     input, output, error, frames, decisions, queued or carried payloads (a resume payload a
 *     `continueAsNew` carry brought, issue 22), inbox or child outputs, and no field added later
 *     that nobody listed. It is sealed with the codec's key (or none), not the subject's. A log
 *     that was compacted then still folds to its status, owner, chain and spending, which its
 *     remaining events, whose payloads are gone, could not give.
 * X6. `keyDestroyed` is true only when the store confirms that no copy of the key's bytes is left
 *     in its files (S19). When a reader holding an older snapshot keeps the store from confirming
 *     it past the store's wait, the key is deleted all the same (nothing more of the subject is
 *     written or read through this store) but the erasure says so in `keyUnconfirmed`, and a
 *     second call, once the reader is gone, completes the scrub.
 */
import { isTerminalStatus } from "../kernel/events.ts";
import { isLoomError, SubjectLiveError } from "../kernel/errors.ts";
import type { Clock } from "../kernel/clock.ts";
import type { Json } from "../kernel/json.ts";
import type { Store } from "../store/spi.ts";
import { sealerOf, subjectIndexPrefix, subjectKeyId } from "../trust/sealed-store.ts";
import type { Journal } from "./journal.ts";
import type { Leases } from "./leases.ts";
import { appendSpecs, loadState } from "./load-state.ts";
import { redactedState } from "./erase-redacted.ts";

export interface EraseDeps {
  store: Store;
  journal: Journal;
  clock: Clock;
  leases: Leases;
  ownerId: string;
  cancelOne(id: string, why: Json): Promise<boolean>;
  /** Refuses an execution the caller may not act on (ADR 0111), before anything is done to it. */
  authorize?(id: string): Promise<void>;
}

export interface Erasure {
  subject: string;
  /** Every execution whose log holds the subject's data (and still exists). */
  executions: string[];
  /** Those that were live and this call cancelled (X1). */
  cancelled: string[];
  /**
   * Whether this call destroyed the key and the store confirmed its bytes gone from its files
   * (X6); false when an earlier call had deleted it, or when the scrub is not confirmed.
   */
  keyDestroyed: boolean;
  /**
   * Set when the key's bytes may still be in the store's files (X6): why, and what to do (erase
   * again once the reader named ends). Absent when the scrub is confirmed.
   */
  keyUnconfirmed?: string;
}

export async function eraseSubject(deps: EraseDeps, subject: string): Promise<Erasure> {
  const executions: string[] = [];
  const cancelled: string[] = [];
  // X1, X4: until a reading of the index finds nothing new.
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const fresh = (await holdersOf(deps.store, subject)).filter((id) => !executions.includes(id));
    if (fresh.length === 0) break;
    for (const id of fresh) await deps.authorize?.(id);
    executions.push(...fresh);
    for (const id of fresh) {
      const state = await loadState(deps.store, id);
      if (!state || isTerminalStatus(state.status)) continue;
      if (await deps.cancelOne(id, { kind: "subject-erased", subject })) cancelled.push(id);
    }
  }
  for (const id of executions) {
    const state = await loadState(deps.store, id);
    if (state && !isTerminalStatus(state.status)) {
      throw new SubjectLiveError(
        `execution "${id}" holds data of subject "${subject}" and could not be ended; nothing was erased`,
        { executionId: id, subject },
      );
    }
  }
  // X2, X3.
  for (const id of executions) await recordErasure(deps, id, subject);
  const key = await deps.store.destroyKey(subjectKeyId(subject));
  sealerOf(deps.store)?.forgetSubject(subject);
  // X6: destroyed only when the store confirms the bytes are gone.
  if (key.unconfirmed !== undefined) {
    return { subject, executions, cancelled, keyDestroyed: false, keyUnconfirmed: key.unconfirmed };
  }
  return { subject, executions, cancelled, keyDestroyed: key.existed };
}

/** How many times the index is read while new executions keep appearing in it. */
const MAX_ROUNDS = 5;

/** X4: the indexed executions whose sequence 0 is sealed with the subject's key. */
async function holdersOf(store: Store, subject: string): Promise<string[]> {
  const prefix = subjectIndexPrefix(subject);
  const sealer = sealerOf(store);
  const out: string[] = [];
  for (const key of await store.listKeys(prefix)) {
    const id = key.slice(prefix.length);
    const first = sealer ? (await sealer.readRaw(id, 0, 1))[0] : undefined;
    if (first?.seq === 0 && first.meta?.keyId === subjectKeyId(subject)) out.push(id);
  }
  return out;
}

async function recordErasure(deps: EraseDeps, id: string, subject: string): Promise<void> {
  // An ended execution's lease is still taken now and then (the supervisor delivering a wake to
  // it): a fact fenced out by one is written again under a new lease, after reading the log anew.
  for (let attempt = 1; ; attempt++) {
    try {
      return await recordOnce(deps, id, subject);
    } catch (e) {
      const raced = isLoomError(e, "LOOM_FENCED") || isLoomError(e, "LOOM_SEQUENCE_CONFLICT");
      if (!raced || attempt >= MAX_ATTEMPTS) throw e;
    }
  }
}

/** How many times recordErasure writes its fact when another lease holder fences it out. */
const MAX_ATTEMPTS = 5;

async function recordOnce(deps: EraseDeps, id: string, subject: string): Promise<void> {
  const lease = await deps.leases.acquireWaiting(id);
  let appended = false;
  try {
    const state = await loadState(deps.store, id);
    if (!state) return;
    if (!state._erased?.includes(subject)) {
      await appendSpecs(
        deps.journal,
        deps.clock,
        state,
        lease.fence,
        [{ kind: "SUBJECT_ERASED", payload: { subject }, kernel: true }],
        { releaseLease: deps.ownerId },
      );
      appended = true;
    }
    // X5 (also when an earlier call recorded the fact and stopped before this).
    await deps.store.saveSnapshot(id, { seq: state.seq, state: redactedState(state) });
  } finally {
    if (!appended) await deps.leases.release(id, lease.fence);
  }
}
