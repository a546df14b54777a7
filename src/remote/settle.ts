/**
 * Settlement by the durable fact (ADR 0020 A7): an outcome is read from the execution's log,
 * never taken from a message. A continued execution settles as its chain's head does.
 */
import { createRuntime, type Runtime } from "../runtime/runtime.ts";
import { InvalidInputError } from "../kernel/errors.ts";
import type { Store } from "../store/spi.ts";
import type { ExecutionOutcome } from "./worker-runtime.ts";

/** What reads an outcome: a runtime on the store the workers write to. */
export type OutcomeReader = Pick<Runtime, "waitForCompletion" | "followToHead">;

/**
 * The outcome `id`'s log ends with, following its chain to the head while it says `continued`
 * (ADR 0109). A continued generation whose successor routing cannot reach settles as continued.
 */
export async function settledOutcome(reader: OutcomeReader, id: string): Promise<ExecutionOutcome> {
  let at = id;
  for (;;) {
    const outcome = await reader.waitForCompletion(at);
    if (outcome.status !== "continued") return outcome;
    const head = await reader.followToHead(at);
    if (head === at) return outcome;
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
