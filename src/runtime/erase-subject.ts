/**
 * eraseSubject: makes a data subject's payloads unrecoverable while every log keeps its shape
 * (issue 10; docs/trust.md). The subject's payloads are sealed with the subject's own key
 * (trust/sealed-store.ts V2), so erasure destroys that key (crypto-shredding): no event is
 * rewritten, so each log still folds and its audit chain still verifies (trust/audit.ts A3).
 *
 * Invariants (tests cite X1..X4):
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
 *     too.
 */
import { isTerminalStatus } from "../kernel/events.ts";
import { SubjectLiveError } from "../kernel/errors.ts";
import type { Clock } from "../kernel/clock.ts";
import type { Json } from "../kernel/json.ts";
import type { Store } from "../store/spi.ts";
import { sealerOf, subjectIndexPrefix, subjectKeyId } from "../trust/sealed-store.ts";
import type { Journal } from "./journal.ts";
import type { Leases } from "./leases.ts";
import { appendSpecs, loadState } from "./load-state.ts";

export interface EraseDeps {
  store: Store;
  journal: Journal;
  clock: Clock;
  leases: Leases;
  ownerId: string;
  cancelOne(id: string, why: Json): Promise<boolean>;
}

export interface Erasure {
  subject: string;
  /** Every execution whose log holds the subject's data (and still exists). */
  executions: string[];
  /** Those that were live and this call cancelled (X1). */
  cancelled: string[];
  /** Whether this call destroyed the key (false when an earlier call had). */
  keyDestroyed: boolean;
}

export async function eraseSubject(deps: EraseDeps, subject: string): Promise<Erasure> {
  const prefix = subjectIndexPrefix(subject);
  const indexed = (await deps.store.listKeys(prefix)).map((k) => k.slice(prefix.length));
  const executions: string[] = [];
  for (const id of indexed) if ((await deps.store.head(id)) >= 0) executions.push(id);
  const cancelled: string[] = [];
  // X1.
  for (const id of executions) {
    const state = await loadState(deps.store, id);
    if (!state || isTerminalStatus(state.status)) continue;
    if (await deps.cancelOne(id, { kind: "subject-erased", subject })) cancelled.push(id);
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
  const keyDestroyed = await deps.store.destroyKey(subjectKeyId(subject));
  sealerOf(deps.store)?.forgetSubject(subject);
  return { subject, executions, cancelled, keyDestroyed };
}

async function recordErasure(deps: EraseDeps, id: string, subject: string): Promise<void> {
  const lease = await deps.leases.acquireWaiting(id);
  let appended = false;
  try {
    const state = await loadState(deps.store, id);
    if (!state || state._erased?.includes(subject)) return;
    await appendSpecs(
      deps.journal,
      deps.clock,
      state,
      lease.fence,
      [{ kind: "SUBJECT_ERASED", payload: { subject }, kernel: true }],
      { releaseLease: deps.ownerId },
    );
    appended = true;
  } finally {
    if (!appended) await deps.leases.release(id, lease.fence);
  }
}
