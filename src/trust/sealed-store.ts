/**
 * The sealing store: a decorator every runtime puts over its store. It seals what a store would
 * write in the clear (event payloads, snapshots, inbox messages, schedule inputs) with the payload
 * codec or a data subject's key, stamps the audit chain on every event, and opens what it reads,
 * so the runtime and the fold only ever see plain payloads (issue 10).
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
import type { Envelope, EnvelopeMeta } from "../kernel/events.ts";
import type { Clock } from "../kernel/clock.ts";
import { CodecKeyError, InvalidInputError } from "../kernel/errors.ts";
import { isPlainObject, jsonText, type Json } from "../kernel/json.ts";
import type { ExecutionState, Snapshot } from "../fold/state.ts";
import type {
  AppendBatch,
  AppendOutcome,
  InboxMessage,
  Lease,
  Schedule,
  Store,
} from "../store/spi.ts";
import { aad, AES_GCM, aesGcmOpen, aesGcmSeal, type PayloadCodec } from "./codec.ts";
import { SubjectKeys, subjectIndexPrefix, subjectKeyId, subjectOfKeyId } from "./subject-keys.ts";
import { AuditHasher, hashOf, type AuditSetting } from "./audit.ts";

export interface SealOptions {
  codec?: PayloadCodec | undefined;
  audit?: AuditSetting | undefined;
  clock: Clock;
}

/** What the sealing store adds to the Store it wraps. */
export interface SealedStore extends Store {
  readonly [SEALED]: Sealer;
}

const SEALED = Symbol("loom.sealed");
/** V8: the codec name of a plain value escaped because it looks sealed. */
const PLAIN = "plain";
/** The most heads a sealing store remembers. */
const MAX_KNOWN = 10_000;

export { subjectIndexPrefix, subjectKeyId, SUBJECT_KEY_TTL_MS } from "./subject-keys.ts";

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
    putSchedule: (s: Omit<Schedule, "cursorMs">) => sealer.putSchedule(s),
    listSchedules: () => sealer.listSchedules(),
    deleteExecution: (id: string) => sealer.deleteExecution(id),
    acquireLease: (id: string, owner: string, opts: Parameters<Store["acquireLease"]>[2]) =>
      sealer.acquireLease(id, owner, opts),
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

type MessageIn = Omit<InboxMessage, "chainId" | "seq"> & { subject?: string };

interface HeadRecord {
  seq: number;
  hash: string | undefined;
  /** The fence it was appended under; undefined when it came from a read (V5). */
  fence: number | undefined;
}

interface SealedValue {
  $sealed: { codec: string; keyId: string; data: string };
}

export class Sealer {
  private readonly codec: PayloadCodec | undefined;
  private readonly hasher: AuditHasher | undefined;
  private readonly heads = new Map<string, HeadRecord>();
  private readonly keys: SubjectKeys;

  constructor(
    readonly inner: Store,
    options: SealOptions,
  ) {
    this.codec = options.codec;
    this.hasher =
      options.audit === undefined || options.audit === false
        ? undefined
        : new AuditHasher(options.audit);
    this.keys = new SubjectKeys(inner, options.codec, options.clock);
  }

  get audited(): boolean {
    return this.hasher !== undefined;
  }

  /** The hasher verifyLog recomputes with: this runtime's audit setting. */
  get auditHasher(): AuditHasher | undefined {
    return this.hasher;
  }

  // ---- events ------------------------------------------------------------------------------------

  async appendMany(batches: readonly AppendBatch[]): Promise<AppendOutcome[]> {
    if (!this.codec && !this.hasher && !batches.some((b) => b.subject !== undefined)) {
      return this.inner.appendMany(batches);
    }
    const inCall = new Map<string, HeadRecord>();
    const sealed: AppendBatch[] = [];
    for (const b of batches) sealed.push(await this.sealBatch(b, inCall));
    let outcomes: AppendOutcome[];
    try {
      outcomes = await this.inner.appendMany(sealed);
    } catch (e) {
      // The outcome is unknown: what this process knew of these heads may be stale.
      for (const b of batches) this.heads.delete(b.executionId);
      throw e;
    }
    sealed.forEach((b, i) => {
      const last = b.events[b.events.length - 1];
      if (outcomes[i]?.ok && last && this.hasher) {
        this.noteHead(b.executionId, { seq: last.seq, hash: hashOf(last), fence: b.fence });
      } else {
        this.heads.delete(b.executionId);
      }
    });
    return outcomes;
  }

  private async sealBatch(b: AppendBatch, inCall: Map<string, HeadRecord>): Promise<AppendBatch> {
    const subject = b.subject;
    if (subject !== undefined && b.expectedSeq === 0) {
      // V6: the key and the index entry before the first event; V9: made only here.
      await this.keys.get(subject, true);
      await this.inner.putKey(`${subjectIndexPrefix(subject)}${b.executionId}`, "1");
    }
    let events = b.events;
    if (this.codec || subject !== undefined) {
      events = [];
      for (const e of b.events) events.push(await this.sealEvent(e, subject));
    }
    if (this.hasher) {
      let prev = await this.prevHash(b, inCall);
      events = events.map((e) => {
        const stamped = (this.hasher as AuditHasher).stamp(e, prev);
        prev = hashOf(stamped);
        return stamped;
      });
      const last = events[events.length - 1];
      if (last) inCall.set(b.executionId, { seq: last.seq, hash: prev, fence: b.fence });
    }
    const out: AppendBatch = { ...b, events };
    delete out.subject;
    if (b.snapshot && (this.codec || subject !== undefined)) {
      const sealedState = await this.sealValue(
        b.snapshot.stateJson,
        subject,
        aad("snapshot", b.executionId, b.snapshot.seq),
      );
      out.snapshot = { seq: b.snapshot.seq, stateJson: JSON.stringify(sealedState) };
    }
    return out;
  }

  private async sealEvent(e: Envelope, subject: string | undefined): Promise<Envelope> {
    const bySubject = subject !== undefined && e.kind !== "SUBJECT_ERASED"; // V3
    if (!bySubject && !this.codec) return e;
    const plain = Buffer.from(jsonText(e.payload), "utf8");
    const aad = eventAad(e);
    let codec: string;
    let keyId: string;
    let sealed: Uint8Array;
    if (bySubject) {
      const key = await this.keys.mustHave(subject);
      codec = AES_GCM;
      keyId = subjectKeyId(subject);
      sealed = aesGcmSeal(key, plain, aad);
    } else {
      const c = this.codec as PayloadCodec;
      const out = await c.seal(plain, aad);
      codec = c.name;
      keyId = out.keyId;
      sealed = out.sealed;
    }
    const meta: EnvelopeMeta = { ...e.meta, codec, keyId };
    if (bySubject && e.kind === "EXECUTION_STARTED") meta.identity = identityOf(e.payload, subject);
    const bytes = Buffer.isBuffer(sealed) ? sealed : Buffer.from(sealed);
    return { ...e, payload: bytes.toString("base64"), meta };
  }

  /** V5. */
  private async prevHash(
    b: AppendBatch,
    inCall: Map<string, HeadRecord>,
  ): Promise<string | undefined> {
    const id = b.executionId;
    const before = b.expectedSeq - 1;
    if (before < 0) return this.predecessorHead(b.events[0]);
    const known = inCall.get(id) ?? this.heads.get(id);
    if (known && known.seq === before) return known.hash;
    const [e] = await this.inner.read(id, before, 1);
    return e && e.seq === before ? hashOf(e) : undefined;
  }

  /** A2: a successor's sequence 0 names its predecessor's head hash. */
  private async predecessorHead(first: Envelope | undefined): Promise<string | undefined> {
    const p = first?.payload;
    if (!isPlainObject(p) || !isPlainObject(p.continuedFrom)) return undefined;
    const from = p.continuedFrom.executionId;
    if (typeof from !== "string") return undefined;
    const head = await this.inner.head(from);
    const known = this.heads.get(from);
    if (known && known.seq === head) return known.hash;
    const [e] = head < 0 ? [] : await this.inner.read(from, head, 1);
    return hashOf(e);
  }

  async read(id: string, from?: number, limit?: number): Promise<Envelope[]> {
    const raw = await this.inner.read(id, from, limit);
    const last = raw[raw.length - 1];
    if (last && this.hasher) {
      const known = this.heads.get(id);
      if (!known || known.seq < last.seq) {
        this.noteHead(id, { seq: last.seq, hash: hashOf(last), fence: known?.fence });
      }
    }
    if (!raw.some(isStamped)) return raw;
    const out: Envelope[] = [];
    for (const e of raw) out.push(isStamped(e) ? await this.openEvent(e) : e);
    return out;
  }

  /** Bounded like the stores' own caches: past MAX_KNOWN entries it starts again (V5 reads). */
  private noteHead(id: string, record: HeadRecord): void {
    if (this.heads.size >= MAX_KNOWN && !this.heads.has(id)) this.heads.clear();
    this.heads.set(id, record);
  }

  /** The log as stored: sealed payloads and the audit chain (verifyLog reads it). */
  readRaw(id: string, from?: number, limit?: number): Promise<Envelope[]> {
    return this.inner.read(id, from, limit);
  }

  private async openEvent(e: Envelope): Promise<Envelope> {
    const meta: EnvelopeMeta = { ...e.meta };
    const codec = meta.codec;
    const keyId = meta.keyId;
    delete meta.codec;
    delete meta.keyId;
    delete meta.prev;
    delete meta.hash;
    delete meta.identity;
    const out: Envelope = { ...e, meta };
    if (Object.keys(meta).length === 0) delete out.meta;
    if (typeof codec !== "string" || typeof keyId !== "string" || typeof e.payload !== "string") {
      return out;
    }
    out.payload = await this.openBytes(Buffer.from(e.payload, "base64"), codec, keyId, eventAad(e));
    const identity = e.meta?.identity;
    if (isPlainObject(out.payload) && "$erased" in out.payload && isPlainObject(identity)) {
      out.payload = { ...identity, ...out.payload }; // V7
    }
    return out;
  }

  // ---- snapshots, messages, schedules -----------------------------------------------------------

  async saveSnapshot(id: string, snapshot: Snapshot): Promise<void> {
    const subject = snapshot.state._subject;
    if (!this.codec && subject === undefined) return this.inner.saveSnapshot(id, snapshot);
    const where = aad("snapshot", id, snapshot.seq);
    const sealed = await this.sealValue(JSON.stringify(snapshot.state), subject, where);
    // The inner store writes the state as opaque JSON; what it holds here is the sealed form.
    const opaque = sealed as unknown as ExecutionState;
    return this.inner.saveSnapshot(id, { seq: snapshot.seq, state: opaque });
  }

  async loadSnapshot(id: string): Promise<Snapshot | undefined> {
    const s = await this.inner.loadSnapshot(id);
    if (!s || !isSealedValue(s.state)) return s;
    // The sequence number is bound in: a snapshot row moved to another sequence number does not
    // open.
    const state = await this.openValue(s.state, aad("snapshot", id, s.seq));
    // V7: a snapshot sealed with a destroyed key is no snapshot; the log folds without it.
    if (!isPlainObject(state) || "$erased" in state) return undefined;
    return { seq: s.seq, state: state as unknown as ExecutionState };
  }

  async appendMessage(chainId: string, message: MessageIn): Promise<number> {
    const { subject, ...rest } = message;
    if (!this.codec && subject === undefined) {
      return this.inner.appendMessage(chainId, { ...rest, payload: escaped(rest.payload) });
    }
    const where = aad("inbox", chainId, rest.topic, rest.key);
    const payload = await this.sealValue(jsonText(rest.payload), subject, where);
    return this.inner.appendMessage(chainId, { ...rest, payload: payload as unknown as Json });
  }

  async readMessages(
    chainId: string,
    topic: string,
    afterSeq: number,
    limit: number,
  ): Promise<InboxMessage[]> {
    const raw = await this.inner.readMessages(chainId, topic, afterSeq, limit);
    if (!raw.some((m) => isSealedValue(m.payload))) return raw;
    const out: InboxMessage[] = [];
    for (const m of raw) {
      if (!isSealedValue(m.payload)) out.push(m);
      else {
        const where = aad("inbox", chainId, m.topic, m.key);
        out.push({ ...m, payload: await this.openValue(m.payload, where) });
      }
    }
    return out;
  }

  async putSchedule(s: Omit<Schedule, "cursorMs">): Promise<void> {
    if (!this.codec || s.input === undefined) {
      return this.inner.putSchedule(s.input === undefined ? s : { ...s, input: escaped(s.input) });
    }
    const input = await this.sealValue(jsonText(s.input), undefined, aad("schedule", s.name));
    return this.inner.putSchedule({ ...s, input: input as unknown as Json });
  }

  async listSchedules(): Promise<Schedule[]> {
    const raw = await this.inner.listSchedules();
    const out: Schedule[] = [];
    for (const s of raw) {
      if (!isSealedValue(s.input)) out.push(s);
      else out.push({ ...s, input: await this.openValue(s.input, aad("schedule", s.name)) });
    }
    return out;
  }

  private async sealValue(
    text: string,
    subject: string | undefined,
    aad: string,
  ): Promise<SealedValue> {
    const plain = Buffer.from(text, "utf8");
    if (subject !== undefined) {
      const key = await this.keys.mustHave(subject);
      const data = aesGcmSeal(key, plain, aad).toString("base64");
      return { $sealed: { codec: AES_GCM, keyId: subjectKeyId(subject), data } };
    }
    const c = this.codec as PayloadCodec;
    const out = await c.seal(plain, aad);
    const data = Buffer.from(out.sealed).toString("base64");
    return { $sealed: { codec: c.name, keyId: out.keyId, data } };
  }

  private async openValue(v: SealedValue, where: string): Promise<Json> {
    const { codec, keyId, data } = v.$sealed;
    const bytes = Buffer.from(data, "base64");
    if (codec === PLAIN) return JSON.parse(bytes.toString("utf8")) as Json; // V8
    return this.openBytes(bytes, codec, keyId, where);
  }

  private async openBytes(
    sealed: Buffer,
    codec: string,
    keyId: string,
    aad: string,
  ): Promise<Json> {
    let plain: Uint8Array;
    const subject = subjectOfKeyId(keyId);
    if (subject !== undefined) {
      const key = await this.keys.get(subject, false);
      if (!key) return { $erased: subject }; // V7
      plain = aesGcmOpen(key, sealed, aad);
    } else {
      if (!this.codec || this.codec.name !== codec) {
        throw new CodecKeyError(
          `a payload is sealed with codec "${codec}" (key "${keyId}"), and this runtime has ${this.codec ? `codec "${this.codec.name}"` : "no codec"}`,
          { codec, keyId },
        );
      }
      plain = await this.codec.open(sealed, keyId, aad);
    }
    return JSON.parse(Buffer.from(plain).toString("utf8")) as Json;
  }

  /** Forgets a subject's key held in this process (eraseSubject calls it after destroying it). */
  forgetSubject(subject: string): void {
    this.keys.forget(subject);
  }

  // ---- leases and deletes (V5) ---------------------------------------------------------------------

  async acquireLease(
    id: string,
    owner: string,
    opts: Parameters<Store["acquireLease"]>[2],
  ): Promise<Lease | undefined> {
    const lease = await this.inner.acquireLease(id, owner, opts);
    if (lease) this.noteLeases([lease]);
    return lease;
  }

  noteLeases(leases: Lease[]): Lease[] {
    for (const l of leases) {
      const known = this.heads.get(l.executionId);
      if (known?.fence !== undefined && known.fence + 1 !== l.fence) {
        this.heads.delete(l.executionId);
      } else if (known) {
        known.fence = l.fence;
      }
    }
    return leases;
  }

  async deleteExecution(id: string): Promise<boolean> {
    this.heads.delete(id);
    return this.inner.deleteExecution(id);
  }
}

function eventAad(e: Envelope): string {
  return aad("event", e.executionId, e.seq, e.kind);
}

/** V7: what an erased start still says (none of it is the subject's data). */
function identityOf(payload: Json, subject: string): Json {
  const p = isPlainObject(payload) ? payload : {};
  const out: Record<string, Json> = { subject };
  for (const k of ["flow", "flowVersion", "principal", "chainId", "generation", "parent"]) {
    const v = p[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/**
 * V8: a plain value that has the sealed form (a message anyone may send) is stored wrapped in it
 * under the `plain` codec, so it reads back as itself and is never taken for a sealed one.
 */
function escaped(v: Json): Json {
  if (!isSealedValue(v)) return v;
  const data = Buffer.from(jsonText(v), "utf8").toString("base64");
  return { $sealed: { codec: PLAIN, keyId: "", data } };
}

function isStamped(e: Envelope): boolean {
  const m = e.meta;
  return m !== undefined && (m.hash !== undefined || m.codec !== undefined);
}

function isSealedValue(v: unknown): v is SealedValue {
  if (!isPlainObject(v) || Object.keys(v).length !== 1) return false;
  const s = v.$sealed;
  return (
    isPlainObject(s) &&
    typeof s.codec === "string" &&
    typeof s.keyId === "string" &&
    typeof s.data === "string"
  );
}
