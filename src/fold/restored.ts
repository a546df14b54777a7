/**
 * STATE_RESTORED (schema 1.6.0): what `runtime.restoreFromState` and `runtime.resumeAs` record,
 * and what the fold takes from it.
 *
 * Invariants (tests cite R1, R2):
 * R1. A restore replaces only the flow body's replay record: its frames and the values of calls
 *     kept without one (`_settled`, schema 1.13.0: settled.ts L5), the order of its calls, its
 *     decisions, the resume payloads queued for it and its input (and, for resumeAs, the flow
 *     that drives it). A record with no `_settled` leaves an execution that keeps calls lean
 *     with none; one with `_settled` makes any execution keep its later plain settlings lean;
 *     one that keeps a call both as a frame and by its value (or under two kinds) is refused.
 *     The counts the fold keeps beside frames (steps in flight, open waits, the suspends
 *     waiting for a resume) are derived from the frames, never taken from the caller.
 * R2. Nothing else comes from the caller (ADR 0109 fix rounds 1 (1) and 3 (2)): the identity
 *     keys (`_principal`, `_chain`, `_continuedTo`), what was spent (`_resources`,
 *     `_scopeResources`, `_quotaExceeded`), the budget, the inbox cursors, `startedAt` and the
 *     deadline stay what the log made them before the restore, so nothing a rotation inherits
 *     can be forged by a restore.
 *
 * `readRestored` checks a caller's state the same way the fold reads it, so a state the runtime
 * accepts is exactly one the fold applies, and one it refuses names its first problem.
 */
import type { CallKind } from "../kernel/events.ts";
import { readErrorData } from "../kernel/errors.ts";
import { isPlainObject, type Json } from "../kernel/json.ts";
import type { ExecutionState, Frame, FrameStatus, SettledCalls } from "./state.ts";
import { childOf } from "../kernel/children.ts";
import { stepHeadOf } from "./frames.ts";
import { LEAN_KINDS } from "./settled.ts";

/** The part of a folded state a restore replaces (R1). */
export interface RestoredRecord {
  frames: Record<string, Frame>;
  order: Record<string, string[]>;
  _decisions: Record<string, Json>;
  _resumePayloads: Json[];
  input?: Json;
  /** The values of calls kept without a frame (schema 1.13.0, settled.ts L1). */
  _settled?: SettledCalls;
}

const STATUSES: Readonly<Record<CallKind, readonly FrameStatus[]>> = {
  step: ["started", "completed", "failed", "cancelled"],
  decision: [],
  sleep: ["waiting", "fired"],
  suspend: ["waiting", "resumed", "timedOut"],
  receive: ["waiting", "received", "timedOut"],
  spawn: ["completed"],
  child: ["waiting", "settled"],
};

const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

const finite = (v: Json | undefined): v is number => typeof v === "number" && Number.isFinite(v);

function readFrame(callId: string, v: Json | undefined): Frame | string {
  const where = `frame "${callId}"`;
  if (!isPlainObject(v)) return `${where} is not an object`;
  const kind = v.kind;
  if (typeof kind !== "string" || !Object.hasOwn(STATUSES, kind) || kind === "decision") {
    return `${where} has no valid kind (step, sleep, suspend, receive, spawn or child)`;
  }
  const statuses = STATUSES[kind as CallKind];
  if (typeof v.status !== "string" || !statuses.includes(v.status as FrameStatus)) {
    return `${where}: a ${kind}'s status is one of ${statuses.join(", ")}`;
  }
  if (typeof v.name !== "string" || typeof v.scope !== "string") {
    return `${where} needs a name and a scope (strings)`;
  }
  if (!finite(v.firstStartedAt) || !Number.isSafeInteger(v.attempts) || Number(v.attempts) < 1) {
    return `${where} needs firstStartedAt (a number) and attempts (an integer >= 1)`;
  }
  const frame: Frame = {
    kind: kind as CallKind,
    name: v.name,
    scope: v.scope,
    status: v.status as FrameStatus,
    firstStartedAt: v.firstStartedAt,
    attempts: Number(v.attempts),
  };
  if (v.input !== undefined) frame.input = v.input;
  if (v.output !== undefined) frame.output = v.output;
  if (v.error !== undefined) {
    const error = readErrorData(v.error, "LOOM_RESTORED");
    if (!error) return `${where}: error needs a name and a message`;
    frame.error = error;
  }
  for (const key of ["wakeAtMs", "retryAtMs", "attemptStartedAt"] as const) {
    const n = v[key];
    if (n === undefined) continue;
    if (!finite(n)) return `${where}: ${key} must be a number`;
    frame[key] = n;
  }
  if (kind === "receive") {
    if (typeof v.topic !== "string") return `${where}: a receive needs its topic`;
    frame.topic = v.topic;
  }
  if (kind === "spawn" || kind === "child") {
    if (typeof v.childId !== "string") return `${where}: a ${kind} frame needs its childId`;
    frame.childId = v.childId;
  }
  return frame;
}

function readOrder(v: Json | undefined): Record<string, string[]> | string {
  if (v === undefined) return {};
  if (!isPlainObject(v)) return "order must be an object of scope -> call list";
  const order: Record<string, string[]> = {};
  for (const [scope, list] of Object.entries(v)) {
    if (FORBIDDEN_KEYS.has(scope)) return `order has a forbidden scope name "${scope}"`;
    if (!Array.isArray(list) || !list.every((x) => typeof x === "string")) {
      return `order["${scope}"] must be a list of strings`;
    }
    order[scope] = [...list];
  }
  return order;
}

/**
 * The values of calls kept without a frame (settled.ts L1), or the first reason they are not. A
 * call is kept one way only (L4): an id that `frames` or another kind also holds is refused, or
 * the replay would be handed the value while every reader shows the frame.
 */
function readSettled(
  v: Json | undefined,
  frames: Record<string, Frame>,
): SettledCalls | string | undefined {
  if (v === undefined) return undefined;
  if (!isPlainObject(v)) return "_settled must be an object of kind -> (call id -> value)";
  const settled: SettledCalls = {};
  const seen = new Set<string>();
  for (const [kind, values] of Object.entries(v)) {
    const lean = LEAN_KINDS.find((k) => k === kind);
    if (lean === undefined) return `_settled has no kind "${kind}" (step, suspend or receive)`;
    if (!isPlainObject(values)) return `_settled.${kind} must be an object of call id -> value`;
    for (const callId of Object.keys(values)) {
      if (FORBIDDEN_KEYS.has(callId) || stepHeadOf(callId) === undefined) {
        return `_settled.${kind} has a call id "${callId}" that is not <scope><name>#<n>`;
      }
      if (Object.hasOwn(frames, callId) || seen.has(callId)) {
        return `_settled.${kind} keeps call "${callId}", which the state also records otherwise (a frame or another kind)`;
      }
      seen.add(callId);
    }
    settled[lean] = { ...values };
  }
  return settled;
}

/** The record a caller's state restores (R1), or the first reason it cannot. */
export function readRestored(v: Json | undefined): RestoredRecord | string {
  if (!isPlainObject(v)) return "the state must be an object (a folded state, as getState gives)";
  if (v.frames !== undefined && !isPlainObject(v.frames)) return "frames must be an object";
  const frames: Record<string, Frame> = {};
  for (const [callId, f] of Object.entries(v.frames ?? {})) {
    if (FORBIDDEN_KEYS.has(callId)) return `frames has a forbidden call id "${callId}"`;
    const frame = readFrame(callId, f);
    if (typeof frame === "string") return frame;
    frames[callId] = frame;
  }
  const order = readOrder(v.order);
  if (typeof order === "string") return order;
  const decisions = v._decisions ?? {};
  if (!isPlainObject(decisions)) return "_decisions must be an object";
  if (Object.keys(decisions).some((k) => FORBIDDEN_KEYS.has(k))) {
    return "_decisions has a forbidden call id";
  }
  const queued = v._resumePayloads ?? [];
  if (!Array.isArray(queued)) return "_resumePayloads must be a list";
  const settled = readSettled(v._settled, frames);
  if (typeof settled === "string") return settled;
  const record: RestoredRecord = {
    frames,
    order,
    _decisions: { ...decisions },
    _resumePayloads: [...queued],
  };
  if (v.input !== undefined) record.input = v.input;
  if (settled !== undefined) record._settled = settled;
  return record;
}

/** Folds a restore into `s` (R1, R2): the record replaces the replay state; the rest stays. */
export function applyRestored(s: ExecutionState, record: RestoredRecord): void {
  s.frames = record.frames;
  s.order = record.order;
  s._decisions = record._decisions;
  s._resumePayloads = record._resumePayloads;
  if (record._settled !== undefined) s._settled = record._settled;
  else if (s._settled !== undefined) s._settled = {};
  if (record.input === undefined) delete s.input;
  else s.input = record.input;
  let inFlight = 0;
  let openWaits = 0;
  const openSuspends: string[] = [];
  for (const [callId, f] of Object.entries(record.frames)) {
    if (f.kind === "step" && f.status === "started") inFlight++;
    // A wait on a child whose slot the log has settled is settled, as awaitChild's fold does.
    const settled = f.kind === "child" && f.status === "waiting" && settledSlot(s, f.childId);
    if (settled) {
      f.status = "settled";
      f.output = settled as unknown as Json;
    }
    if (f.status !== "waiting") continue;
    openWaits++;
    if (f.kind === "suspend") openSuspends.push(callId);
  }
  s.inFlight = inFlight;
  s.openWaits = openWaits;
  s._openSuspends = openSuspends;
}

function settledSlot(s: ExecutionState, childId: string | undefined) {
  return childId === undefined ? undefined : childOf(s._children, childId)?.outcome;
}
