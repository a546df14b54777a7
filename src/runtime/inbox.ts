/**
 * The chain inbox (ADR 0110, as ADR 0109 relies on it): `runtime.send(id, message, { key })`
 * appends to the stream of the addressed execution's chain (S12), and `ctx.receive()` takes
 * messages in order. A consumption is a MESSAGE_CONSUMED fact in the consumer's log, and the fold
 * accepts only a message past its topic's cursor and outside the dedupe window, so whoever
 * writes the fact (the body, a sender waking a parked receive, the park-time re-read), each
 * message is delivered once. The cursors and window ride a rotation in the carry.
 *
 * Invariants (tests cite N1..N4):
 * N1. A message is consumed at most once per chain: the fold ignores a MESSAGE_CONSUMED at or
 *     before its topic's cursor, and one whose key the dedupe window holds (it only moves the
 *     cursor, as a `duplicate`).
 * N2. A message is never lost: it is in the stream before anyone is woken, and a receive that
 *     is about to park reads the stream once more (the park-time re-read), so a send that raced
 *     the wait's registration is found.
 * N3. Specs are computed from the state at the moment they are queued (synchronously), so two
 *     deliverers never hand one message to two receives.
 * N4. Bad input (a topic or key that is not a short non-empty string, a payload with no JSON
 *     form or over its bound) is refused before the stream is appended to.
 */
import { InvalidInputError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { RECEIVE } from "../fold/fold.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { InboxMessage } from "../store/spi.ts";
import type { EventSpec } from "./journal.ts";

export type { ReceiveOptions } from "./contract.ts";
import type { CallerOptions } from "./runtime-options.ts";

/** The topic of `send` and `receive` when none is named. */
export const DEFAULT_TOPIC = "main";
/** How many messages one delivery reads at a time. */
export const READ_BATCH = 100;

export interface SendOptions extends CallerOptions {
  /**
   * The sender's idempotency key: a message whose key the chain consumed among its last 1,024
   * is dropped, so a sender may retry. Default: a fresh id (no deduplication).
   */
  key?: string;
  topic?: string;
}

/** A topic or key: 1..200 characters, not `__proto__`. */
export function checkedName(value: unknown, what: string, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== "string" || value === "" || value.length > 200 || value === "__proto__") {
    throw new InvalidInputError(`${what} must be a string of 1 to 200 characters`);
  }
  return value;
}

/** The last consumed sequence number of `topic` (-1 before the first). */
export function cursorOf(state: ExecutionState, topic: string): number {
  const cursors = state._inbox?.cursors;
  return cursors && Object.hasOwn(cursors, topic) ? (cursors[topic] ?? -1) : -1;
}

/** The receives of `topic` waiting for a message, oldest first (all topics when undefined). */
export function waitingReceives(state: ExecutionState, topic?: string): string[] {
  const out: string[] = [];
  for (const [callId, f] of Object.entries(state.frames)) {
    if (
      f.kind === "receive" &&
      f.status === "waiting" &&
      (topic === undefined || f.topic === topic)
    )
      out.push(callId);
  }
  return out;
}

/**
 * What taking `messages` (one topic's, in order) means for `state` now (N3): each message past
 * the cursor whose key was seen is a `duplicate`; the others go to `receivers` in order (a
 * receive's call id and scope), one each, until either runs out.
 */
export function consumeSpecs(
  state: ExecutionState,
  topic: string,
  messages: readonly InboxMessage[],
  receivers: readonly { callId: string; scope: string }[],
): EventSpec[] {
  let cursor = cursorOf(state, topic);
  const seen = new Set(state._inbox?.dedupe ?? []);
  const specs: EventSpec[] = [];
  let next = 0;
  for (const m of messages) {
    if (m.topic !== topic || m.seq <= cursor) continue;
    const base: { [k: string]: Json } = { topic, seq: m.seq, key: m.key };
    if (seen.has(m.key)) {
      specs.push({ kind: "MESSAGE_CONSUMED", payload: { ...base, duplicate: true } });
      cursor = m.seq;
      continue;
    }
    const receiver = receivers[next++];
    if (!receiver) break;
    specs.push({
      kind: "MESSAGE_CONSUMED",
      payload: {
        ...base,
        callId: receiver.callId,
        scope: receiver.scope,
        name: RECEIVE,
        payload: m.payload,
      },
    });
    seen.add(m.key);
    cursor = m.seq;
  }
  return specs;
}

/** The specs that hand `messages` to the receives of `topic` waiting in `state` (N3). */
export function deliverySpecs(
  state: ExecutionState,
  topic: string,
  messages: readonly InboxMessage[],
): EventSpec[] {
  const receivers = waitingReceives(state, topic).map((callId) => ({
    callId,
    scope: state.frames[callId]?.scope ?? "",
  }));
  if (receivers.length === 0) return [];
  return consumeSpecs(state, topic, messages, receivers);
}
