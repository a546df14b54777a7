/**
 * Settlement by the durable fact (ADR 0020 A7): an outcome is read from the execution's log,
 * never taken from a message. A continued execution settles as its chain's head does, and one
 * whose head routing cannot reach settles as failed (worker-runtime.ts S6).
 */
import { createRuntime, type Runtime } from "../runtime/runtime.ts";
import {
  ChainHopLimitError,
  errorToData,
  InvalidInputError,
  isLoomError,
} from "../kernel/errors.ts";
import type { Store } from "../store/spi.ts";
import type { ExecutionOutcome } from "./worker-runtime.ts";

/** What reads an outcome: a runtime on the store the workers write to. */
export type OutcomeReader = Pick<Runtime, "waitForCompletion" | "followToHead">;

/**
 * The outcome `id`'s log ends with, following its chain to the head while it says `continued`
 * (ADR 0109 D6). S6: a chain routing cannot follow to its head (ChainHopLimitError, or a
 * continued generation whose successor is missing or unverified) settles as failed with that
 * error: the head's outcome is unknown, and an unreadable chain is never a completed dispatch
 * (ADR 0109 fix round 3 (3)).
 */
export async function settledOutcome(reader: OutcomeReader, id: string): Promise<ExecutionOutcome> {
  let at = id;
  for (;;) {
    const outcome = await reader.waitForCompletion(at);
    if (outcome.status !== "continued") return outcome;
    let head: string;
    try {
      head = await reader.followToHead(at);
    } catch (e) {
      if (isLoomError(e, ChainHopLimitError.code))
        return { status: "failed", error: errorToData(e) };
      throw e;
    }
    if (head === at) {
      // A continued generation is never a head: its successor is out of reach.
      const error = new ChainHopLimitError(
        `the chain of "${id}" cannot be followed past "${at}", which continued: its successor is missing or not verified`,
        { from: id, furthest: at },
      );
      return { status: "failed", error: errorToData(error) };
    }
    at = head;
  }
}

/** A reader, and how to let go of it: closes the runtime `readerOf` made, never a caller's. */
export interface OwnedReader {
  reader: OutcomeReader;
  close(): Promise<void>;
}

/**
 * The reader for a `{ runtime }` or a `{ store }`: for a store, a runtime on it that runs no
 * background loop and leaves the store open (it only reads), closed by `close`.
 */
export function readerOf(source: { runtime?: Runtime; store?: Store }, what: string): OwnedReader {
  if (source.runtime !== undefined) return { reader: source.runtime, close: async () => undefined };
  if (source.store !== undefined) {
    const runtime = createRuntime({ store: source.store, background: false, closeStore: false });
    return { reader: runtime, close: () => runtime.close() };
  }
  throw new InvalidInputError(`${what} needs a runtime or a store to read outcomes from`);
}
