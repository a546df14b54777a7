/**
 * The park-time inbox re-read of a run, its part of N2 (inbox.ts: a message is never lost):
 * before a run parks with receives waiting, it reads its chain's inbox once more, so a message
 * sent while a wait was being registered is taken, not left in the stream. A Run (run.ts) owns
 * one and asks it from `maybePark`.
 *
 * Invariants (N2 as inbox.ts numbers it; RR1 and RR2 this module's):
 * N2. A run with receives waiting parks only once a re-read at its current sequence number
 *     found nothing (or failed, RR2); what one finds is delivered (specs made from the state as
 *     they are queued, N3), and the run goes on.
 * RR1. One re-read at a time, and at most one per sequence number of the run.
 * RR2. A failed read is reported, never thrown: its messages stay in the stream for the next
 *     send or re-read, and the run may park.
 */
import type { InboxMessage } from "../store/spi.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";
import { cursorOf, deliverySpecs, waitingReceives } from "./inbox.ts";
import type { EventSpec } from "./journal.ts";

/** The run that re-reads, as the re-read sees it (Run implements it). */
export interface RereadingRun {
  readonly state: ExecutionState;
  readonly active: boolean;
  enqueueDetached(specs: readonly EventSpec[]): void;
  maybePark(): void;
}

/** What the re-read needs of the runtime (RunHost has it). */
export interface InboxHost {
  /** A topic's messages in a chain's inbox past `afterSeq` (one batch). */
  readInbox(chainId: string, topic: string, afterSeq: number): Promise<InboxMessage[]>;
  /** Reports an error no caller awaits. */
  report(error: unknown): void;
}

export class InboxReread {
  /** The re-read in flight, and the sequence number it last ran at (N2). */
  private inboxRead: Promise<void> | undefined;
  private inboxReadAt = -1;

  constructor(
    private readonly run: RereadingRun,
    private readonly host: InboxHost,
  ) {}

  /**
   * N2: before a run parks with receives waiting, it reads its chain's inbox once more (once per
   * sequence number), so a message sent while the wait was being registered is taken, not left.
   * True while that read is in flight: the run parks when it finds nothing.
   */
  pending(): boolean {
    if (this.inboxRead !== undefined) return true;
    const state = this.run.state;
    // Every open wait a suspend: no receive waits, and no frame scan on this hot path.
    if (state.openWaits <= state._openSuspends.length) return false;
    const topics = new Set<string>();
    for (const callId of waitingReceives(state)) {
      const topic = state.frames[callId]?.topic;
      if (topic !== undefined) topics.add(topic);
    }
    // RR1: one re-read per sequence number.
    if (topics.size === 0 || this.inboxReadAt === state.seq) return false;
    const seq = state.seq;
    const chainId = chainOf(state).chainId;
    this.inboxRead = Promise.all(
      [...topics].map(async (topic) => {
        const messages = await this.host.readInbox(chainId, topic, cursorOf(state, topic));
        return { topic, messages };
      }),
    ).then(
      (reads) => {
        this.inboxRead = undefined;
        this.inboxReadAt = seq;
        if (!this.run.active) return;
        const specs = reads.flatMap((r) => deliverySpecs(this.run.state, r.topic, r.messages));
        if (specs.length > 0) this.run.enqueueDetached(specs);
        else this.run.maybePark();
      },
      (e: unknown) => {
        // RR2: the messages stay in the stream: the next send or re-read delivers them.
        this.inboxRead = undefined;
        this.inboxReadAt = seq;
        this.host.report(e);
        this.run.maybePark();
      },
    );
    return true;
  }
}
