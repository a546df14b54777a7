/**
 * The fold of steps: STEP_STARTED, and the attempts and outcome that settle a step
 * (STEP_COMPLETED, STEP_FAILED, STEP_CANCELLED).
 *
 * Invariants:
 * - A step is in flight (counted in `inFlight`, fold.ts F7) from its start until it settles, once;
 *   a retried attempt (STEP_FAILED with `retrying`, schema 1.3.0) keeps it open.
 * - A step that settled before its start was written (a fast step, schema 1.1.0) is made from
 *   its settling event alone and never counted in flight.
 */
import type { Envelope } from "../kernel/events.ts";
import { callHead, errorOf, frameOf, record, type Payload } from "./frames.ts";
import type { Handlers } from "./handler.ts";
import type { ExecutionState, Frame } from "./state.ts";

export const STEP_HANDLERS: Handlers = {
  STEP_STARTED(s, p, e) {
    if (!callHead(p)) return;
    const existing = frameOf(s, p.callId);
    if (existing) {
      if (existing.kind === "step" && existing.status === "started") {
        existing.attempts++;
        existing.attemptStartedAt = startedAt(p, e);
        delete existing.retryAtMs;
      }
      return;
    }
    openStep(s, p, e);
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
      const f = frameOf(s, p.callId) ?? openStep(s, p, e);
      if (f?.kind !== "step" || f.status !== "started") return;
      f.error = errorOf(p.error);
      delete f.attemptStartedAt;
      const wait = p.retryInMs;
      if (typeof wait === "number" && Number.isFinite(wait) && wait >= 0) f.retryAtMs = e.at + wait;
      return;
    }
    settleStep(s, p, e, (f) => {
      f.status = "failed";
      f.error = errorOf(p.error);
    });
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
    const head = callHead(p);
    if (!head) return;
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
    return;
  }
  if (f.kind !== "step" || f.status !== "started") return;
  delete f.retryAtMs;
  delete f.attemptStartedAt;
  apply(f);
  s.inFlight--;
}

/** Opens a step's frame from its start (a STEP_STARTED, or a first failed attempt). */
function openStep(s: ExecutionState, p: Payload, e: Envelope): Frame | undefined {
  const head = callHead(p);
  if (!head) return undefined;
  const f: Frame = {
    kind: "step",
    ...head,
    status: "started",
    firstStartedAt: startedAt(p, e),
    attempts: 1,
  };
  if (p.input !== undefined) f.input = p.input;
  s.frames[head.callId] = f;
  record(s, head.scope, `step:${head.callId}`);
  s.inFlight++;
  return f;
}

/** When a step started: its recorded `startedAt` (schema 1.1.0), else the envelope's time. */
function startedAt(p: Payload, e: Envelope): number {
  return typeof p.startedAt === "number" && Number.isFinite(p.startedAt) ? p.startedAt : e.at;
}
