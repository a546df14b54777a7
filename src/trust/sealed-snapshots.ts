/**
 * What the sealing store (sealed-store.ts) does to snapshots: seals them with the codec or the
 * subject's key (V2, V7), then binds them to the audit chain (snapshot-binding.ts B1), on the way
 * in, whether saved alone or riding a batch; on the way out, checks the binding (B2), reports a
 * snapshot that fails it, and opens what passes.
 *
 * - B2: a snapshot that does not verify reads as absent, and is reported once per row (runtime's
 *   `onError`), so that a log read again and again does not report it again and again.
 * - B5: with no audit, the stored form is what it was before issue 22.
 */
import { SnapshotRejectedError } from "../kernel/errors.ts";
import { isPlainObject } from "../kernel/json.ts";
import type { ExecutionState, Snapshot } from "../fold/state.ts";
import type { AppendBatch, Store } from "../store/spi.ts";
import type { AuditHasher } from "./audit.ts";
import { hashOf } from "./audit.ts";
import { aad, type PayloadCodec } from "./codec.ts";
import type { PayloadSeals } from "./payload-seals.ts";
import { isSealedValue } from "./sealed-values.ts";
import { boundText, chainHashAt, checkBinding, isBound, type RawRead } from "./snapshot-binding.ts";

/** The most rejected rows remembered so each is reported once (then the record starts again). */
const MAX_REPORTED = 10_000;

export class SealedSnapshots {
  private readonly reported = new Set<string>();
  private readonly readRaw: RawRead;

  constructor(
    private readonly inner: Store,
    private readonly codec: PayloadCodec | undefined,
    private readonly hasher: AuditHasher | undefined,
    private readonly seals: PayloadSeals,
    private readonly onProblem: ((e: Error) => void) | undefined,
  ) {
    this.readRaw = (id, from, limit) => inner.read(id, from, limit);
  }

  async save(id: string, snapshot: Snapshot): Promise<void> {
    const subject = snapshot.state._subject;
    if (!this.codec && subject === undefined && !this.hasher) {
      return this.inner.saveSnapshot(id, snapshot);
    }
    // Serialised before the first await: the caller goes on changing the state it passed.
    let text = await this.storedText(id, snapshot.seq, JSON.stringify(snapshot.state), subject);
    if (this.hasher) {
      const chain = await chainHashAt(this.readRaw, id, snapshot.seq);
      text = boundText(this.hasher, id, snapshot.seq, chain ?? null, text);
    }
    // The inner store writes the state as opaque JSON; what it holds here is the stored form.
    const state = JSON.parse(text) as ExecutionState;
    return this.inner.saveSnapshot(id, { seq: snapshot.seq, state });
  }

  /** The snapshot a batch carries, in its stored form; `b.events` are the batch's, stamped. */
  async forBatch(b: AppendBatch, subject: string | undefined): Promise<AppendBatch["snapshot"]> {
    const snap = b.snapshot;
    if (!snap || (!this.codec && subject === undefined && !this.hasher)) return snap;
    const text = await this.storedText(b.executionId, snap.seq, snap.stateJson, subject);
    if (!this.hasher) return { seq: snap.seq, stateJson: text };
    const own = b.events.find((e) => e.seq === snap.seq);
    const chain = own ? hashOf(own) : await chainHashAt(this.readRaw, b.executionId, snap.seq);
    return {
      seq: snap.seq,
      stateJson: boundText(this.hasher, b.executionId, snap.seq, chain ?? null, text),
    };
  }

  async load(id: string): Promise<Snapshot | undefined> {
    const s = await this.inner.loadSnapshot(id);
    if (!s) return undefined;
    let stored: unknown = s.state;
    if (this.hasher) {
      const check = await checkBinding(this.hasher, this.readRaw, id, s.seq, stored);
      if (!check.verified) {
        this.reject(id, s.seq, check.problem, stored);
        return undefined;
      }
    }
    if (isBound(stored)) stored = stored.state;
    if (!isSealedValue(stored)) return { seq: s.seq, state: stored as ExecutionState };
    // The sequence number is bound in: a snapshot row moved to another sequence number does not
    // open.
    const state = await this.seals.openValue(stored, aad("snapshot", id, s.seq));
    // V7: a snapshot sealed with a destroyed key is no snapshot; the log folds without it.
    if (!isPlainObject(state) || "$erased" in state) return undefined;
    return { seq: s.seq, state: state as unknown as ExecutionState };
  }

  /** The state's JSON text as stored before any binding: sealed (V2) by a codec or a subject. */
  private async storedText(
    id: string,
    seq: number,
    text: string,
    subject: string | undefined,
  ): Promise<string> {
    if (!this.codec && subject === undefined) return text;
    return JSON.stringify(await this.seals.sealValue(text, subject, aad("snapshot", id, seq)));
  }

  /** B2: reported once per row; the caller folds the log from its events. */
  private reject(id: string, seq: number, problem: string, stored: unknown): void {
    const mark = `${id}\u0000${seq}\u0000${isBound(stored) ? stored.$audit.mac : problem}`;
    if (this.reported.has(mark)) return;
    if (this.reported.size >= MAX_REPORTED) this.reported.clear();
    this.reported.add(mark);
    this.onProblem?.(
      new SnapshotRejectedError(
        `the snapshot of execution "${id}" at sequence ${seq} is not bound to its audit chain (${problem}): it is ignored and the log is folded from its events`,
        { executionId: id, seq, problem },
      ),
    );
  }
}
