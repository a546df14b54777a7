/**
 * The memory store's events: how a log holds them, and how it is searched by sequence number.
 *
 * E1. A stored event is a copy: a caller that mutates what it appended or read back cannot change
 *     the log. Its payload is kept as the JSON text the runtime already made once (`jsonText`) and
 *     parsed on the first read only (most events are appended and never read back while the
 *     process lives); every read gets a copy of that parse.
 * E2. A log is ordered by sequence number, dense until compaction leaves gaps (S14): its last
 *     event's seq is the head, whatever its length.
 */
import type { Envelope, EnvelopeMeta, EventKind } from "../../kernel/events.ts";
import { copyJson, jsonText, type Json } from "../../kernel/json.ts";

/** E1: the envelope's fields, a copy of its (flat) meta, and its payload as JSON text. */
export class StoredEvent implements Envelope {
  readonly executionId: string;
  readonly seq: number;
  readonly kind: EventKind;
  readonly at: number;
  readonly meta: EnvelopeMeta | undefined;
  #text: string | undefined;
  #parsed: Json = null;

  constructor(e: Envelope) {
    this.executionId = e.executionId;
    this.seq = e.seq;
    this.kind = e.kind;
    this.at = e.at;
    this.meta = e.meta === undefined ? undefined : { ...e.meta };
    this.#text = jsonText(e.payload);
  }

  /** A copy of the payload. */
  get payload(): Json {
    if (this.#text !== undefined) {
      this.#parsed = JSON.parse(this.#text) as Json;
      this.#text = undefined;
    }
    return copyJson(this.#parsed);
  }

  /** What a read returns: a copy, shaped as the SQLite store's envelopes. */
  copy(): Envelope {
    const out: Envelope = {
      executionId: this.executionId,
      seq: this.seq,
      kind: this.kind,
      at: this.at,
      payload: this.payload,
    };
    if (this.meta !== undefined) out.meta = { ...this.meta };
    return out;
  }
}

export const copyEvent = (e: StoredEvent): Envelope => e.copy();

/** E2: the last sequence number of `log` (compaction leaves gaps below it, S14), or -1. */
export const lastSeq = (log: readonly Envelope[] | undefined) => log?.[log.length - 1]?.seq ?? -1;

/** The index of the first event of `log` with `seq >= from` (E2: the log is ordered by seq). */
export function firstAtOrAfter(log: readonly Envelope[], from: number): number {
  // A log never compacted is dense: the index is the sequence number.
  if (log[from]?.seq === from) return from;
  let lo = 0;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((log[mid] as Envelope).seq < from) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
