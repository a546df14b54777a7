/**
 * The sealer behind a sealing store (sealed-store.ts): what it does to each call it takes over.
 * It seals batches, snapshots, messages and schedule inputs on the way in and opens them on the
 * way out (payload-seals.ts), stamps the audit chain on every event (V4: after sealing, so the
 * chain is over stored bytes), and keeps the heads the chain links to (chain-heads.ts, V5).
 *
 * - V1: with no codec, no audit and no subject, a batch reaches the store unchanged and a read
 *   returns what the store returned.
 * - V6, V9: a subject's key is made (put-if-absent) and the execution indexed under the subject
 *   before its first event, and only then; a later write of a subject whose key is gone is
 *   refused (SubjectKeys.mustHave).
 * - B1, B2: snapshots, saved alone or riding a batch, are sealed then bound to the chain, and
 *   checked before they are used (sealed-snapshots.ts, snapshot-binding.ts).
 */
import type { Envelope } from "../kernel/events.ts";
import type { Clock } from "../kernel/clock.ts";
import { jsonText, type Json } from "../kernel/json.ts";
import type { Snapshot } from "../fold/state.ts";
import type {
  AppendBatch,
  AppendOutcome,
  InboxMessage,
  Lease,
  Schedule,
  Store,
} from "../store/spi.ts";
import { aad, type PayloadCodec } from "./codec.ts";
import { SubjectKeys, subjectIndexPrefix } from "./subject-keys.ts";
import { AuditHasher, hashOf, type AuditSetting } from "./audit.ts";
import { ChainHeads, type HeadRecord } from "./chain-heads.ts";
import { PayloadSeals } from "./payload-seals.ts";
import { escaped, isSealedValue, isStamped } from "./sealed-values.ts";
import { SealedSnapshots } from "./sealed-snapshots.ts";

export interface SealOptions {
  codec?: PayloadCodec | undefined;
  audit?: AuditSetting | undefined;
  clock: Clock;
  /** Where a problem found on a read goes (a rejected snapshot, B2): the runtime's `onError`. */
  onProblem?: ((e: Error) => void) | undefined;
}

export type MessageIn = Omit<InboxMessage, "chainId" | "seq"> & { subject?: string };

export class Sealer {
  private readonly codec: PayloadCodec | undefined;
  private readonly hasher: AuditHasher | undefined;
  private readonly heads: ChainHeads;
  private readonly keys: SubjectKeys;
  private readonly seals: PayloadSeals;
  private readonly snapshots: SealedSnapshots;

  constructor(
    readonly inner: Store,
    options: SealOptions,
  ) {
    this.codec = options.codec;
    this.hasher =
      options.audit === undefined || options.audit === false
        ? undefined
        : new AuditHasher(options.audit);
    this.heads = new ChainHeads(inner);
    this.keys = new SubjectKeys(inner, options.codec, options.clock);
    this.seals = new PayloadSeals(options.codec, this.keys);
    this.snapshots = new SealedSnapshots(
      inner,
      options.codec,
      this.hasher,
      this.seals,
      options.onProblem,
    );
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
      for (const b of batches) this.heads.forget(b.executionId);
      throw e;
    }
    sealed.forEach((b, i) => {
      const last = b.events[b.events.length - 1];
      if (outcomes[i]?.ok && last && this.hasher) {
        this.heads.note(b.executionId, { seq: last.seq, hash: hashOf(last), fence: b.fence });
      } else {
        this.heads.forget(b.executionId);
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
      for (const e of b.events) events.push(await this.seals.sealEvent(e, subject));
    }
    if (this.hasher) {
      let prev = await this.heads.prevHash(b, inCall);
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
    // Sealed and bound to the chain (B1), after the events are stamped: it binds to their hashes.
    const snapshot = await this.snapshots.forBatch(out, subject);
    if (snapshot) out.snapshot = snapshot;
    return out;
  }

  async read(id: string, from?: number, limit?: number): Promise<Envelope[]> {
    const raw = await this.inner.read(id, from, limit);
    const last = raw[raw.length - 1];
    if (last && this.hasher) this.heads.noteRead(id, last);
    if (!raw.some(isStamped)) return raw;
    const out: Envelope[] = [];
    for (const e of raw) out.push(isStamped(e) ? await this.seals.openEvent(e) : e);
    return out;
  }

  /** The log as stored: sealed payloads and the audit chain (verifyLog reads it). */
  readRaw(id: string, from?: number, limit?: number): Promise<Envelope[]> {
    return this.inner.read(id, from, limit);
  }

  // ---- snapshots, messages, schedules -----------------------------------------------------------

  saveSnapshot(id: string, snapshot: Snapshot): Promise<void> {
    return this.snapshots.save(id, snapshot);
  }

  /** B2: a snapshot that is not bound to the audit chain reads as absent (and is reported). */
  loadSnapshot(id: string): Promise<Snapshot | undefined> {
    return this.snapshots.load(id);
  }

  async appendMessage(chainId: string, message: MessageIn): Promise<number> {
    const { subject, ...rest } = message;
    if (!this.codec && subject === undefined) {
      return this.inner.appendMessage(chainId, { ...rest, payload: escaped(rest.payload) });
    }
    const where = aad("inbox", chainId, rest.topic, rest.key);
    const payload = await this.seals.sealValue(jsonText(rest.payload), subject, where);
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
        out.push({ ...m, payload: await this.seals.openValue(m.payload, where) });
      }
    }
    return out;
  }

  async putSchedule(s: Omit<Schedule, "cursorMs" | "paused">): Promise<void> {
    if (!this.codec || s.input === undefined) {
      return this.inner.putSchedule(s.input === undefined ? s : { ...s, input: escaped(s.input) });
    }
    const input = await this.seals.sealValue(jsonText(s.input), undefined, aad("schedule", s.name));
    return this.inner.putSchedule({ ...s, input: input as unknown as Json });
  }

  async listSchedules(): Promise<Schedule[]> {
    const raw = await this.inner.listSchedules();
    const out: Schedule[] = [];
    for (const s of raw) {
      if (!isSealedValue(s.input)) out.push(s);
      else out.push({ ...s, input: await this.seals.openValue(s.input, aad("schedule", s.name)) });
    }
    return out;
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
    return this.heads.noteLeases(leases);
  }

  async deleteExecution(id: string): Promise<boolean> {
    this.heads.forget(id);
    return this.inner.deleteExecution(id);
  }
}
