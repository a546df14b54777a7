/**
 * The fold of a chain inbox's messages (schema 1.5.0): MESSAGE_CONSUMED answers a receive, and
 * moves the topic's cursor and the dedupe window.
 *
 * Invariants:
 * - A message counts once: only one past its topic's cursor, and only one whose key is not in the
 *   dedupe window (a `duplicate` one only moves the cursor).
 * - A fork's copy of a consumption answers the receive, so the re-run replays, but the fork's own
 *   inbox starts fresh (V3).
 */
import type { Envelope } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import { isPlainObject } from "../kernel/json.ts";
import { DEDUPE_WINDOW } from "../kernel/chain.ts";
import { callHead, frameOf, record, safeKey, settleWait, str, type Payload } from "./frames.ts";
import type { Handlers } from "./handler.ts";
import { isRecorded, keepValueOnly } from "./settled.ts";
import type { ExecutionState, Frame } from "./state.ts";

/** The name of `ctx.receive` calls (a SUSPENDED with it is a receive's wait). */
export const RECEIVE = "receive";

/** A receive's topic: a safe key of at most 200 characters. */
export function topicOf(v: Json | undefined): string | undefined {
  return str(v) && safeKey(v) && v.length <= 200 ? v : undefined;
}

export const INBOX_HANDLERS: Handlers = {
  MESSAGE_CONSUMED(s, p, e) {
    consumeMessage(s, p, e);
  },
};

/** A copied envelope of a fork (`meta.forkedFrom`). */
function copiedByFork(e: Envelope): boolean {
  return isPlainObject(e.meta) && e.meta.forkedFrom !== undefined;
}

/**
 * MESSAGE_CONSUMED (schema 1.5.0): the chain inbox's message `seq` of `topic` was taken. Only a
 * message past the topic's cursor counts (exactly once). A `duplicate` one (its key is in the
 * dedupe window) only moves the cursor; any other settles the receive `callId` names (or
 * records it, when it was answered at once) and joins the dedupe window.
 */
function consumeMessage(s: ExecutionState, p: Payload, e: Envelope): void {
  const topic = topicOf(p.topic);
  const seq = p.seq;
  const key = p.key;
  if (topic === undefined || !str(key) || typeof seq !== "number") return;
  if (!Number.isSafeInteger(seq) || seq < 0) return;
  if (copiedByFork(e)) {
    // A fork's copy of the original's consumption: it answers the receive (so the re-run
    // replays), but the fork's own inbox starts fresh (V3).
    if (p.duplicate !== true) settleReceive(s, p, e, topic);
    return;
  }
  const inbox = s._inbox ?? { cursors: {}, dedupe: [] };
  const cursor = Object.hasOwn(inbox.cursors, topic) ? (inbox.cursors[topic] ?? -1) : -1;
  if (seq <= cursor) return;
  const seen = inbox.dedupe.includes(key);
  if (p.duplicate === true) {
    if (!seen) return;
    inbox.cursors[topic] = seq;
    s._inbox = inbox;
    return;
  }
  if (seen || !settleReceive(s, p, e, topic)) return;
  inbox.cursors[topic] = seq;
  inbox.dedupe.push(key);
  if (inbox.dedupe.length > DEDUPE_WINDOW) inbox.dedupe.shift();
  s._inbox = inbox;
}

/** Answers the receive a MESSAGE_CONSUMED names; false when it cannot (then it is inert). */
function settleReceive(s: ExecutionState, p: Payload, e: Envelope, topic: string): boolean {
  const head = callHead(p);
  if (!head || head.name !== RECEIVE) return false;
  const output = p.payload === undefined ? null : p.payload;
  const f = frameOf(s, head.callId);
  if (f) {
    if (f.kind !== "receive" || f.status !== "waiting" || f.topic !== topic) return false;
    f.status = "received";
    f.output = output;
    settleWait(s);
    keepValueOnly(s, head.callId, f); // settled.ts L1
    return true;
  }
  if (isRecorded(s, head.callId)) return false; // settled.ts L3
  const made: Frame = {
    kind: "receive",
    ...head,
    status: "received",
    firstStartedAt: e.at,
    attempts: 1,
    topic,
    output,
  };
  s.frames[head.callId] = made;
  record(s, head.scope, `receive:${head.callId}`);
  keepValueOnly(s, head.callId, made); // settled.ts L1
  return true;
}
