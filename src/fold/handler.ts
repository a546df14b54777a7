/**
 * The shape of the fold's handlers (fold.ts): one per event kind, each updating the state in place
 * from the envelope's payload. A handler never throws and reads no clock (F1, F2): what it cannot
 * read it ignores.
 */
import type { Envelope } from "../kernel/events.ts";
import type { Payload } from "./frames.ts";
import type { ExecutionState } from "./state.ts";

export type Handler = (s: ExecutionState, p: Payload, e: Envelope) => void;

/** Handlers by event kind; a kind with none folds to a new `seq` and `updatedAt` only. */
export type Handlers = Partial<Record<string, Handler>>;
