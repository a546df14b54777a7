/**
 * When a snapshot rides a batch: one policy for a run's appends (run-appends.ts) and for appends
 * to a state read back without a run (load-state.ts L3), carried from the one to the other when
 * a run is made from that state (L2).
 *
 * P1. A snapshot rides the batch that crosses the policy: at least `snapshotEvery` events since
 *     the last one, and at least as many bytes appended since as the last snapshot had. The
 *     second rule keeps the cost per appended byte constant however large the state grows.
 * P2. An appended event counts about its payload's JSON length plus EVENT_BYTES for the rest.
 *     When the last snapshot's size is not known (a state read back), it is estimated once,
 *     when first needed, as the state's size less what was appended since.
 */
import type { ExecutionState } from "../fold/state.ts";
import type { AppendBatch } from "../store/spi.ts";

/** P2: what an event adds besides its payload. */
export const EVENT_BYTES = 64;

export class SnapshotPolicy {
  constructor(
    /** The sequence number the last snapshot (or the count) starts from. */
    private lastSeq: number,
    /** P2: about the bytes appended since. */
    private bytesSince: number,
    /** The last snapshot's length; undefined until estimated (P2). */
    private lastBytes: number | undefined,
  ) {}

  /** P2: an appended event whose payload's JSON is about `payloadBytes` long. */
  appended(payloadBytes: number): void {
    this.bytesSince += payloadBytes + EVENT_BYTES;
  }

  /**
   * P1: the snapshot the batch ending at `state` carries, if it crosses the policy; `stateBytes`
   * estimates the state's size, asked only when the last snapshot's is not known (P2).
   */
  snapshotOf(
    state: ExecutionState,
    snapshotEvery: number,
    stateBytes: () => number,
  ): AppendBatch["snapshot"] {
    if (state.seq - this.lastSeq < snapshotEvery) return undefined;
    this.lastBytes ??= Math.max(0, stateBytes() - this.bytesSince);
    if (this.bytesSince < this.lastBytes) return undefined;
    const stateJson = JSON.stringify(state);
    this.lastSeq = state.seq;
    this.lastBytes = stateJson.length;
    this.bytesSince = 0;
    return { seq: state.seq, stateJson };
  }
}
