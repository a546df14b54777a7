/**
 * What a sealing store remembers of logs' heads, so that a batch's audit chain links to the event
 * before it without reading it. It keeps the sealing store's V5 (sealed-store.ts): a record is
 * used only when it is for the sequence number before the batch and no other owner can have
 * appended since (the lease's fence moved by exactly one, or the record came from a read); else
 * the event before is read from the store. A stale record would break the chain, never the log.
 * At most MAX_KNOWN records are kept; past that the record starts again, as the stores' caches do.
 */
import type { Envelope } from "../kernel/events.ts";
import { isPlainObject } from "../kernel/json.ts";
import type { AppendBatch, Lease, Store } from "../store/spi.ts";
import { hashOf } from "./audit.ts";

/** The most heads a sealing store remembers. */
const MAX_KNOWN = 10_000;

export interface HeadRecord {
  seq: number;
  hash: string | undefined;
  /** The fence it was appended under; undefined when it came from a read (V5). */
  fence: number | undefined;
}

export class ChainHeads {
  private readonly heads = new Map<string, HeadRecord>();

  constructor(private readonly inner: Store) {}

  /** Bounded like the stores' own caches: past MAX_KNOWN entries it starts again (V5 reads). */
  note(id: string, record: HeadRecord): void {
    if (this.heads.size >= MAX_KNOWN && !this.heads.has(id)) this.heads.clear();
    this.heads.set(id, record);
  }

  forget(id: string): void {
    this.heads.delete(id);
  }

  /** Notes the last event a read returned, when it is past the record (V5: a read's record). */
  noteRead(id: string, last: Envelope): void {
    const known = this.heads.get(id);
    if (!known || known.seq < last.seq) {
      this.note(id, { seq: last.seq, hash: hashOf(last), fence: known?.fence });
    }
  }

  /** V5. */
  async prevHash(b: AppendBatch, inCall: Map<string, HeadRecord>): Promise<string | undefined> {
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

  /** V5: a record stays good only while the fence moves by exactly one (this owner's lease). */
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
}
