/**
 * The store SPI's chain inbox (S12, stated in spi.ts): its own module so that the contract's
 * file stays within its size. `spi.ts` re-exports both types.
 */
import type { Json } from "../kernel/json.ts";

/** A message in a chain's inbox (ADR 0110): `runtime.send` appends it, `ctx.receive` takes it. */
export interface InboxMessage {
  chainId: string;
  /** Its place in the chain's stream (all topics), dense from 0. */
  seq: number;
  topic: string;
  /** The sender's key: a second message with a key already consumed is dropped (dedupe). */
  key: string;
  payload: Json;
  atMs: number;
}

export interface InboxStore {
  /** Appends to the chain's stream and returns the message's sequence number (S12). */
  appendMessage(
    chainId: string,
    message: Omit<InboxMessage, "chainId" | "seq"> & { subject?: string },
  ): Promise<number>;
  /** `topic`'s messages with `seq > afterSeq`, oldest first, at most `limit` (S12). */
  readMessages(
    chainId: string,
    topic: string,
    afterSeq: number,
    limit: number,
  ): Promise<InboxMessage[]>;
}
