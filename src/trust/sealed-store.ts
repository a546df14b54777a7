/**
 * The sealing store: a decorator every runtime puts over its store. It seals what a store would
 * write in the clear (event payloads, snapshots, inbox messages, schedule inputs) with the payload
 * codec or a data subject's key, stamps the audit chain on every event, and opens what it reads,
 * so the runtime and the fold only ever see plain payloads (issue 10).
 *
 * This module is the decorator (a Proxy that hands the calls it takes over to the sealer); the
 * work is the sealer's (sealer.ts), with the cryptography in payload-seals.ts, the at-rest forms
 * in sealed-values.ts, the chain's heads in chain-heads.ts and snapshots bound to the chain in
 * sealed-snapshots.ts (B1..B5: with an audit, a snapshot that is not bound reads as absent).
 *
 * Invariants (tests cite V1..V7):
 * V1. Unused means untouched (G2): with no codec, no audit and no subject, a batch reaches the
 *     store unchanged and a read returns what the store returned.
 * V2. A sealed event's payload is the base64 of the sealed bytes and its meta names the codec and
 *     the key (`meta.codec`, `meta.keyId`), bound to its execution, sequence number and kind
 *     (codec.ts C2). A subject's execution is sealed with the subject's own key
 *     (`keyId: "subject:<id>"`), whether or not a codec is set; with a codec that key is stored
 *     sealed by the codec.
 * V3. SUBJECT_ERASED is never sealed with a subject's key: the erasure stays readable.
 * V4. Sealing happens before hashing (audit.ts A1, A3): the chain is over stored bytes.
 * V5. `prev` is the hash of the event before, from this process's record of the log's head when
 *     that record is for the sequence number before and no other owner can have appended since
 *     (the lease's fence moved by exactly one, or the record came from a read), else read from the
 *     store: a stale record would break the chain, never the log (the store's sequence check
 *     refuses a batch whose `expectedSeq` is stale).
 * V6. A subject's key is written (put-if-absent, S19) and the execution is indexed under the
 *     subject before the execution's first event: erasure finds every execution that holds the
 *     subject's data, and a crash in between leaves an index entry of a log that does not exist.
 * V7. A payload sealed with a destroyed subject key opens as `{ "$erased": <subject> }`. A start
 *     also keeps its flow, principal, chain and subject, recorded in the clear in its meta's
 *     `identity` (none of it is the subject's data), so an erased log still folds to its owner
 *     and subject. A snapshot sealed with the key reads as absent (erasure saves a redacted one,
 *     erase-subject.ts X5).
 * V8. Unsealed messages and schedule inputs that happen to have the sealed form are escaped.
 * V9. A subject's key is made only for an execution's first batch, after reading the store, never
 *     this process's memory: a key another process erased is not brought back from a cache. Any
 *     later batch, message or snapshot of a subject whose key is gone is refused (CodecKeyError),
 *     so nothing of an erased subject is written again.
 */
import { InvalidInputError } from "../kernel/errors.ts";
import type { Snapshot } from "../fold/state.ts";
import type { AppendBatch, Lease, Schedule, Store } from "../store/spi.ts";
import { Sealer, type MessageIn, type SealOptions } from "./sealer.ts";

/** What the sealing store adds to the Store it wraps. */
export interface SealedStore extends Store {
  readonly [SEALED]: Sealer;
}

const SEALED = Symbol("loom.sealed");

export { subjectIndexPrefix, subjectKeyId, SUBJECT_KEY_TTL_MS } from "./subject-keys.ts";
export { Sealer, type SealOptions } from "./sealer.ts";

/** The sealer behind `store`, if it is a sealing store. */
export function sealerOf(store: Store): Sealer | undefined {
  return (store as Partial<SealedStore>)[SEALED];
}

/**
 * Wraps `inner` so that what it stores is sealed and chained. A store that is already a sealing
 * store is returned as it is when no options are given (a second runtime over `runtime.store`).
 */
export function sealStore(inner: Store, options: SealOptions): Store {
  const existing = sealerOf(inner);
  if (existing) {
    if (options.codec !== undefined || (options.audit ?? false) !== false) {
      throw new InvalidInputError(
        "this store is already sealed by another runtime: give codec and audit to the runtime that wraps the plain store",
      );
    }
    return inner;
  }
  const sealer = new Sealer(inner, options);
  const overrides: Partial<Record<PropertyKey, unknown>> = {
    [SEALED]: sealer,
    appendMany: (b: readonly AppendBatch[]) => sealer.appendMany(b),
    read: (id: string, from?: number, limit?: number) => sealer.read(id, from, limit),
    saveSnapshot: (id: string, s: Snapshot) => sealer.saveSnapshot(id, s),
    loadSnapshot: (id: string) => sealer.loadSnapshot(id),
    appendMessage: (chainId: string, m: MessageIn) => sealer.appendMessage(chainId, m),
    readMessages: (chainId: string, topic: string, after: number, limit: number) =>
      sealer.readMessages(chainId, topic, after, limit),
    putSchedule: (s: Omit<Schedule, "cursorMs" | "paused">) => sealer.putSchedule(s),
    listSchedules: () => sealer.listSchedules(),
    deleteExecution: (id: string) => sealer.deleteExecution(id),
    acquireLease: (id: string, owner: string, opts: Parameters<Store["acquireLease"]>[2]) =>
      sealer.acquireLease(id, owner, opts),
    // An admission takes leases as a claim does (queues, S26): the chain heads hear of them.
    admitQueued: async (owner: string, opts: Parameters<Store["admitQueued"]>[1]) => {
      const admitted = await inner.admitQueued(owner, opts);
      sealer.noteLeases(admitted.map((a) => ({ ...a, owner })));
      return admitted;
    },
  };
  if ("claimRunnable" in inner && typeof inner.claimRunnable === "function") {
    const claim = inner.claimRunnable.bind(inner) as (...a: unknown[]) => Promise<Lease[]>;
    overrides.claimRunnable = async (...args: unknown[]) => sealer.noteLeases(await claim(...args));
  }
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(inner, {
    get(target, prop) {
      if (Object.hasOwn(overrides, prop)) return overrides[prop];
      const cached = bound.get(prop);
      if (cached !== undefined) return cached;
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      const fn = (value as (...a: unknown[]) => unknown).bind(target);
      bound.set(prop, fn);
      return fn;
    },
    has(target, prop) {
      return prop === SEALED || Reflect.has(target, prop);
    },
  });
}
