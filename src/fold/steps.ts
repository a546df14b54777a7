/**
 * The fold of steps: STEP_STARTED, and the attempts and outcome that settle a step
 * (STEP_COMPLETED, STEP_FAILED, STEP_CANCELLED).
 *
 * Invariants:
 * - A step is in flight (counted in `inFlight`, fold.ts F7) from its start until it settles, once;
 *   a retried attempt (STEP_FAILED with `retrying`, schema 1.3.0) keeps it open.
 * - A step that settled before its start was written (a fast step, schema 1.1.0) is made from
 *   its settling event alone and never counted in flight.
 * - S3 (schema 1.9.0, issue 20): a STEP_STARTED's `reserved` is what its attempt may spend at most
 *   under the budgets in force; the frame holds it until the attempt settles (its STEP_COMPLETED,
 *   STEP_FAILED or STEP_CANCELLED) or is charged as crashed (a RESOURCE_METERED marked
 *   `estimated: "crashed-attempt"`, fold/metering.ts). So a frame found holding one when a run is
 *   recovered is an attempt that started and never settled, and it is charged once.
 * - S4 (schema 1.10.0, issue 21): a STEP_NOTED on a running step appends its `{ attempt, note }`
 *   to the frame's `notes`, kept across failed attempts so the next attempt reads what an earlier
 *   one set going (a remote task to cancel); a settled step drops them. A note on a step that is
 *   not running, or that is not a plain object, changes nothing.
 * - S5 (schema 1.11.0, issue 23): a step's start (a STEP_STARTED, or a settling event that carries
 *   it) may leave out its `scope` and `name` when its call id gives them (`<scope><name>#<n>`, a
 *   scope ending in "/", a name holding neither "/" nor "#"): they are read from the id. A
 *   start's `startedAt` left out is the event's time (schema 1.1.0's rule).
 */
import type { Envelope } from "../kernel/events.ts";
import { isPlainObject } from "../kernel/json.ts";
import { addResources } from "../kernel/resources.ts";
import {
  callHead,
  errorOf,
  frameOf,
  record,
  safeKey,
  stepHeadOf,
  str,
  type Payload,
} from "./frames.ts";
import type { Handlers } from "./handler.ts";
import { isRecorded, keepValueOnly } from "./settled.ts";
import type { ExecutionState, Frame, Reserved } from "./state.ts";

export { stepHeadOf } from "./frames.ts";

export const STEP_HANDLERS: Handlers = {
  STEP_STARTED(s, p, e) {
    const head = stepHead(p);
    if (!head) return;
    const existing = frameOf(s, p.callId);
    if (existing) {
      if (existing.kind === "step" && existing.status === "started") {
        existing.attempts++;
        existing.attemptStartedAt = startedAt(p, e);
        delete existing.retryAtMs;
        holdReserved(existing, p); // S3
      }
      return;
    }
    // A step kept by its value alone (settled.ts L3) settled: it starts no more.
    if (!isRecorded(s, head.callId)) openStep(s, p, e);
  },
  STEP_COMPLETED(s, p, e) {
    settleStep(s, p, e, (f) => {
      f.status = "completed";
      delete f.error;
      if (p.output !== undefined) f.output = p.output;
    });
  },
  STEP_FAILED(s, p, e) {
    if (p.retrying === true) {
      // A failed attempt (schema 1.3.0): the step stays open and keeps the attempt's error.
      const f = frameOf(s, p.callId) ?? (recorded(s, p) ? undefined : openStep(s, p, e));
      if (f?.kind !== "step" || f.status !== "started") return;
      f.error = errorOf(p.error);
      delete f.attemptStartedAt;
      delete f.reserved; // S3
      const wait = p.retryInMs;
      if (typeof wait === "number" && Number.isFinite(wait) && wait >= 0) f.retryAtMs = e.at + wait;
      return;
    }
    settleStep(s, p, e, (f) => {
      f.status = "failed";
      f.error = errorOf(p.error);
    });
  },
  STEP_NOTED(s, p) {
    const f = frameOf(s, p.callId);
    if (f?.kind !== "step" || f.status !== "started" || !isPlainObject(p.note)) return;
    const attempt = typeof p.attempt === "number" && Number.isInteger(p.attempt) ? p.attempt : 0;
    (f.notes ??= []).push({ attempt, note: p.note }); // S4
  },
  STEP_CANCELLED(s, p, e) {
    settleStep(s, p, e, (f) => {
      f.status = "cancelled";
      f.error = errorOf(p.error);
    });
  },
};

/**
 * Settles a step. A step that settled before its start was written (a fast step: schema 1.1.0)
 * records its start in the settling event itself (`scope`, `name`, `input`, `startedAt`), and
 * the frame is made from it, never counted in flight.
 */
function settleStep(s: ExecutionState, p: Payload, e: Envelope, apply: (f: Frame) => void): void {
  const f = frameOf(s, p.callId);
  if (!f) {
    const head = stepHead(p);
    if (!head || isRecorded(s, head.callId)) return; // settled.ts L3
    const made: Frame = {
      kind: "step",
      ...head,
      status: "started",
      firstStartedAt: startedAt(p, e),
      attempts: 1,
    };
    if (p.input !== undefined) made.input = p.input;
    apply(made);
    s.frames[head.callId] = made;
    record(s, head.scope, `step:${head.callId}`);
    keepValueOnly(s, head.callId, made); // settled.ts L1
    return;
  }
  if (f.kind !== "step" || f.status !== "started") return;
  delete f.retryAtMs;
  delete f.attemptStartedAt;
  delete f.reserved; // S3
  delete f.notes; // S4
  apply(f);
  s.inFlight--;
  keepValueOnly(s, p.callId as string, f); // settled.ts L1 (frameOf found it: a string)
}

/** Whether the step a payload names was recorded and kept by its value alone (settled.ts L3). */
function recorded(s: ExecutionState, p: Payload): boolean {
  return str(p.callId) && isRecorded(s, p.callId);
}

/** Opens a step's frame from its start (a STEP_STARTED, or a first failed attempt). */
function openStep(s: ExecutionState, p: Payload, e: Envelope): Frame | undefined {
  const head = stepHead(p);
  if (!head) return undefined;
  const f: Frame = {
    kind: "step",
    ...head,
    status: "started",
    firstStartedAt: startedAt(p, e),
    attempts: 1,
  };
  if (p.input !== undefined) f.input = p.input;
  holdReserved(f, p); // S3
  s.frames[head.callId] = f;
  record(s, head.scope, `step:${head.callId}`);
  s.inFlight++;
  return f;
}

/** S3: the reservation a STEP_STARTED records for its attempt, or none. */
function holdReserved(f: Frame, p: Payload): void {
  const reserved = readReserved(p.reserved);
  if (reserved) f.reserved = reserved;
  else delete f.reserved;
}

/** A recorded reservation (`{ delta, budgets? }`), or undefined when it is not one. */
export function readReserved(value: unknown): Reserved | undefined {
  if (!isPlainObject(value) || !isPlainObject(value.delta)) return undefined;
  const reserved: Reserved = { delta: addResources({}, value.delta) };
  if (Array.isArray(value.budgets)) {
    reserved.budgets = value.budgets.filter(
      (b): b is string => typeof b === "string" && safeKey(b),
    );
  }
  return reserved;
}

/** When a step started: its recorded `startedAt` (schema 1.1.0), else the envelope's time. */
function startedAt(p: Payload, e: Envelope): number {
  return typeof p.startedAt === "number" && Number.isFinite(p.startedAt) ? p.startedAt : e.at;
}

/** A step's call, scope and name: recorded, or (S5) read from its call id when left out. */
function stepHead(p: Payload): ReturnType<typeof callHead> {
  if (p.scope !== undefined || p.name !== undefined || !str(p.callId)) return callHead(p);
  const head = stepHeadOf(p.callId);
  return head && callHead({ callId: p.callId, scope: head.scope, name: head.name });
}
