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
 */
import type { Envelope } from "../kernel/events.ts";
import type { Clock } from "../kernel/clock.ts";
import { jsonText, isPlainObject, type Json } from "../kernel/json.ts";
import type { ExecutionState, Snapshot } from "../fold/state.ts";
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

export interface SealOptions {
  codec?: PayloadCodec | undefined;
  audit?: AuditSetting | undefined;
  clock: Clock;
}

export type MessageIn = Omit<InboxMessage, "chainId" | "seq"> & { subject?: string };

export class Sealer {
  private readonly codec: PayloadCodec | undefined;
  private readonly hasher: AuditHasher | undefined;
  private readonly heads: ChainHeads;
  private readonly keys: SubjectKeys;
  private readonly seals: PayloadSeals;

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
    if (b.snapshot && (this.codec || subject !== undefined)) {
      const sealedState = await this.seals.sealValue(
        b.snapshot.stateJson,
        subject,
        aad("snapshot", b.executionId, b.snapshot.seq),
      );
      out.snapshot = { seq: b.snapshot.seq, stateJson: JSON.stringify(sealedState) };
    }
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

  async saveSnapshot(id: string, snapshot: Snapshot): Promise<void> {
    const subject = snapshot.state._subject;
    if (!this.codec && subject === undefined) return this.inner.saveSnapshot(id, snapshot);
    const where = aad("snapshot", id, snapshot.seq);
    const sealed = await this.seals.sealValue(JSON.stringify(snapshot.state), subject, where);
    // The inner store writes the state as opaque JSON; what it holds here is the sealed form.
    const opaque = sealed as unknown as ExecutionState;
    return this.inner.saveSnapshot(id, { seq: snapshot.seq, state: opaque });
  }

  async loadSnapshot(id: string): Promise<Snapshot | undefined> {
    const s = await this.inner.loadSnapshot(id);
    if (!s || !isSealedValue(s.state)) return s;
    // The sequence number is bound in: a snapshot row moved to another sequence number does not
    // open.
    const state = await this.seals.openValue(s.state, aad("snapshot", id, s.seq));
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

  async putSchedule(s: Omit<Schedule, "cursorMs">): Promise<void> {
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
