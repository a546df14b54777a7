/**
 * The pure fold: state = fold(state, envelope).
 *
 * Invariants (tests cite F1..F6):
 * F1. Deterministic: the same log gives the same state, byte for byte; no clock, no randomness.
 * F2. Never throws: a malformed envelope or payload is ignored, the same way every time.
 * F3. Terminal kinds fold only from kernel-stamped envelopes (`meta.kernel: true`).
 * F4. Nothing folds after a terminal event but a kernel-stamped SUBJECT_ERASED (schema 1.8.0),
 *     which records an erasure in `_erased` and changes nothing else.
 * F5. foldAll(log) equals foldAll(tail, snapshot) for any snapshot of a prefix of log.
 * F6. Sequence 0 must be EXECUTION_STARTED, and only sequence 0 may be: a log whose first event
 *     is not is ignored whole, and a later EXECUTION_STARTED is ignored.
 * F7. Status: terminal after a terminal event; else `queued` from a start with a queue until it is
 *     admitted (queue.ts QF1); else `parked` while a wait (sleep or suspend, in any scope) is open
 *     and no step is in flight; else `running` (`pending` before any call).
 * F8..F10 are the fold of children (children.ts); F11, F12, what a fork records at its fork point (fork-point.ts).
 *
 * `fold` updates `state` in place and returns it: the caller owns the state it passes in
 * (`foldAll` copies a snapshot before folding onto it; `foldOnto` folds onto the state it is given).
 */
import { isTerminalStatus, type Envelope, type StatusTable } from "../kernel/events.ts";
import { isPlainObject } from "../kernel/json.ts";
import { initialState, type ExecutionState, type Snapshot } from "./state.ts";
import { childDone, startChild } from "./children.ts";
import { DECISION_HANDLERS } from "./decisions.ts";
import { END_HANDLERS } from "./ends.ts";
import { atForkPoint } from "./fork-point.ts";
import type { Payload } from "./frames.ts";
import type { Handlers } from "./handler.ts";
import { INBOX_HANDLERS } from "./inbox.ts";
import { METERING_HANDLERS } from "./metering.ts";
import { QUEUE_HANDLERS } from "./queue.ts";
import { START_HANDLERS } from "./start.ts";
import { STEP_HANDLERS } from "./steps.ts";
import { WAIT_HANDLERS } from "./waits.ts";

export { NEGOTIATE } from "./decisions.ts";
export { RECEIVE } from "./inbox.ts";

export function fold(state: ExecutionState, envelope: Envelope): ExecutionState {
  const e = envelope as unknown;
  if (!isPlainObject(e)) return state;
  const { seq, kind, at, payload } = e as unknown as Envelope;
  if (!Number.isSafeInteger(seq) || seq !== state.seq + 1) return state;
  if (typeof at !== "number" || !Number.isFinite(at)) return state;
  if (seq === 0 && kind !== "EXECUTION_STARTED") return state;
  if (state.seq >= 0 && (e as unknown as Envelope).executionId !== state.executionId) return state;
  const erasure = kind === "SUBJECT_ERASED" && (e as unknown as Envelope).meta?.kernel === true;
  if (state.seq >= 0 && isTerminal(state) && !erasure) return state;
  const p: Payload = isPlainObject(payload) ? payload : {};
  const restart = seq > 0 && kind === "EXECUTION_STARTED";
  const handler = !restart && Object.hasOwn(HANDLERS, kind) ? HANDLERS[kind] : undefined;
  state.seq = seq;
  state.updatedAt = at;
  if (handler) handler(state, p, e as unknown as Envelope);
  atForkPoint(state, e as unknown as Envelope);
  if (RECOMPUTED[state.status] !== false && kind !== "EXECUTION_STARTED" && !erasure) {
    state.status = state.openWaits > 0 && state.inFlight === 0 ? "parked" : "running";
  }
  return state;
}

export function foldAll(events: Iterable<Envelope>, from?: Snapshot): ExecutionState {
  const state = from ? (JSON.parse(JSON.stringify(from.state)) as ExecutionState) : undefined;
  return foldOnto(events, state, from?.state.executionId);
}

/**
 * foldAll without the copy: folds `events` onto `state` in place, for a caller that owns the
 * state and gives it up (loadState, onto a snapshot the store parsed for it alone, store S8a).
 * With no state, folds from the initial state of the first event's execution (else `id`'s).
 */
export function foldOnto(
  events: Iterable<Envelope>,
  state: ExecutionState | undefined,
  id = "",
): ExecutionState {
  for (const e of events) {
    if (!state) {
      const first = isPlainObject(e) ? (e as { executionId?: unknown }).executionId : "";
      state = initialState(typeof first === "string" ? first : "");
    }
    fold(state, e);
  }
  return state ?? initialState(id);
}

/**
 * F7, for every status (kernel/events.ts E5): whether an event that is not a start recomputes
 * it from what is open. A terminal status stays; `queued` stays until its admission (queue.ts
 * QF1). A status not in the table (a corrupt snapshot) is recomputed, as before the table.
 */
const RECOMPUTED: StatusTable<boolean> = {
  queued: false,
  pending: true,
  running: true,
  parked: true,
  completed: false,
  failed: false,
  cancelled: false,
  continued: false,
};

function isTerminal(s: ExecutionState): boolean {
  return isTerminalStatus(s.status);
}

/** Every kind's handler, by family (one module each); the children's are children.ts's. */
const HANDLERS: Handlers = {
  ...START_HANDLERS,
  ...STEP_HANDLERS,
  ...DECISION_HANDLERS,
  ...WAIT_HANDLERS,
  ...INBOX_HANDLERS,
  ...METERING_HANDLERS,
  ...END_HANDLERS,
  ...QUEUE_HANDLERS,
  CHILD_STARTED(s, p, e) {
    startChild(s, p, e);
  },
  CHILD_DONE(s, p) {
    childDone(s, p);
  },
};
