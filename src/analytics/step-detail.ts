/**
 * One call of an execution in full (issue 25 item 2): its input and output or error, each attempt
 * with its start, end and error, what its metering added, the taint marks in what it took and
 * gave, the sequence numbers of its events, where a fork re-runs it, and, for an LLM call, the
 * conversation (conversation.ts). A pure projection of the log and its folded state: the
 * dashboard's `GET /api/executions/:id/call` and `loom show --step` print the same thing, and
 * the browser may compute it itself.
 *
 * Invariants (tests cite C1..C5):
 * C1. The call is the state's frame of that id (its kind, name, scope, status, input, output and
 *     error are the fold's, lean 1.11.0 starts included); no frame, no detail (undefined).
 * C2. A call's events are those whose payload names it (`callId`), in log order. A step's
 *     attempts: each STEP_STARTED opens one (a settling event or a first failed attempt that
 *     carries the start opens it too, schema 1.1.0 and 1.3.0), each STEP_FAILED closes one with
 *     its error, STEP_COMPLETED or STEP_CANCELLED the last; an attempt not closed is running.
 * C3. `metering` is the sum of the call's RESOURCE_METERED deltas (kernel/resources.ts
 *     addResources: Q1 no false zeros, Q7 `costUnknown` sticks).
 * C4. `taint` lists every mark in the input and the output (kernel/taint.ts findAllTaint).
 * C5. `forkAt` is the sequence number just before the call's first event, when the log holds
 *     every event from 0 up to it: a fork there (runtime/fork.ts) copies nothing of the call,
 *     neither its start nor its metering (written before a fast step's settling event), so the
 *     fork runs the call again and charges it once.
 */
import type { ErrorData } from "../kernel/errors.ts";
import type { CallKind, Envelope } from "../kernel/events.ts";
import { isPlainObject, type Json } from "../kernel/json.ts";
import { addResources, type ResourceSnapshot } from "../kernel/resources.ts";
import { findAllTaint } from "../kernel/taint.ts";
import { callFrame } from "../fold/settled.ts";
import type { ExecutionState, Frame, FrameStatus } from "../fold/state.ts";
import { conversationOf, type Conversation } from "./conversation.ts";

export type { Conversation } from "./conversation.ts";

export interface StepAttempt {
  attempt: number;
  startedAtMs?: number;
  endedAtMs?: number;
  durationMs?: number;
  error?: ErrorData;
}

export interface StepDetail {
  callId: string;
  kind: CallKind;
  name: string;
  scope: string;
  /** The frame's status; "sealed" when its payloads could not be opened (`sealed`). */
  status: FrameStatus | "sealed";
  input?: Json;
  output?: Json;
  error?: ErrorData;
  attempts: StepAttempt[];
  startedAtMs?: number;
  endedAtMs?: number;
  durationMs?: number;
  /** What the call's metering added, and its price when priced. */
  metering: ResourceSnapshot;
  /** Every taint mark found in its input or output (kernel/taint.ts T4). */
  taint: { where: "input" | "output"; path: string; source: string }[];
  /** The call's payloads are sealed and this dashboard holds no key for them. */
  sealed: boolean;
  /** The sequence numbers of its events, oldest first. */
  seqs: number[];
  /** Where a fork re-runs this call: the sequence number just before its first start. */
  forkAt?: number;
  /** Present when the call is an LLM call (its input holds `messages`). */
  llm?: Conversation;
}

/** Kinds that end an attempt (C2). */
const SETTLING = new Set(["STEP_COMPLETED", "STEP_FAILED", "STEP_CANCELLED"]);

/** C1..C5: the detail of call `callId`, or undefined when the state has no such call. */
export function stepDetail(
  events: readonly Envelope[],
  state: ExecutionState,
  callId: string,
): StepDetail | undefined {
  const frame = callFrame(state, callId);
  if (frame === undefined) return undefined;
  const mine = events.filter((e) => isPlainObject(e.payload) && e.payload.callId === callId);
  const attempts = frame.kind === "step" ? attemptsOf(mine) : [];
  let metering: ResourceSnapshot = {};
  const quota: Json[] = [];
  for (const e of mine) {
    if (e.kind === "RESOURCE_METERED" && isPlainObject(e.payload)) {
      metering = addResources(metering, e.payload.delta);
    } else if (e.kind === "QUOTA_EXCEEDED") quota.push(e.payload);
  }
  const detail: StepDetail = {
    callId,
    kind: frame.kind,
    name: frame.name,
    scope: frame.scope,
    status: frame.status,
    attempts,
    metering,
    taint: taintOf(frame),
    sealed: false,
    seqs: mine.map((e) => e.seq),
  };
  if (frame.input !== undefined) detail.input = frame.input;
  if (frame.output !== undefined) detail.output = frame.output;
  if (frame.error !== undefined) detail.error = frame.error;
  timesOf(detail, frame, mine, attempts);
  const forkAt = forkPoint(events, mine[0]?.seq);
  if (forkAt !== undefined) detail.forkAt = forkAt;
  const llm = conversationOf({ ...detail, quota });
  if (llm !== undefined) detail.llm = llm;
  return detail;
}

/** C2 */
function attemptsOf(mine: readonly Envelope[]): StepAttempt[] {
  const attempts: StepAttempt[] = [];
  let open: StepAttempt | undefined;
  const opened = (e: Envelope): StepAttempt => {
    const p = isPlainObject(e.payload) ? e.payload : {};
    const at = typeof p.startedAt === "number" ? p.startedAt : e.at;
    const a: StepAttempt = { attempt: attempts.length + 1, startedAtMs: at };
    attempts.push(a);
    return a;
  };
  for (const e of mine) {
    if (e.kind === "STEP_STARTED") {
      open = opened(e);
      continue;
    }
    if (!SETTLING.has(e.kind)) continue;
    const a = open ?? opened(e);
    open = undefined;
    a.endedAtMs = e.at;
    if (a.startedAtMs !== undefined) a.durationMs = Math.max(0, e.at - a.startedAtMs);
    const p = isPlainObject(e.payload) ? e.payload : {};
    if (e.kind !== "STEP_COMPLETED" && isPlainObject(p.error)) a.error = errorData(p.error);
  }
  return attempts;
}

function errorData(v: { [key: string]: Json }): ErrorData {
  const e: ErrorData = {
    name: typeof v.name === "string" ? v.name : "Error",
    code: typeof v.code === "string" ? v.code : "LOOM_APPLICATION",
    message: typeof v.message === "string" ? v.message : "unreadable recorded error",
  };
  if (v.details !== undefined) e.details = v.details;
  return e;
}

/** The call's start (its first attempt's, else the frame's) and, once it settled, its end. */
function timesOf(
  detail: StepDetail,
  frame: Frame,
  mine: readonly Envelope[],
  attempts: readonly StepAttempt[],
): void {
  // A call kept by its value alone (fold/settled.ts L4) has no start in its frame: its first
  // event's is the one the fold would have recorded.
  const startedAtMs = attempts[0]?.startedAtMs ?? frame.firstStartedAt ?? firstStart(mine[0]);
  if (startedAtMs !== undefined) detail.startedAtMs = startedAtMs;
  const open = frame.status === "started" || frame.status === "waiting";
  if (open) return;
  const last = [...mine].reverse().find((e) => e.kind !== "RESOURCE_METERED");
  if (last === undefined) return;
  detail.endedAtMs = last.at;
  if (startedAtMs !== undefined) detail.durationMs = Math.max(0, last.at - startedAtMs);
}

/** When a call's first event says it started: its recorded `startedAt`, else its own time. */
function firstStart(e: Envelope | undefined): number | undefined {
  if (e === undefined) return undefined;
  const p = isPlainObject(e.payload) ? e.payload : {};
  return typeof p.startedAt === "number" ? p.startedAt : e.at;
}

/** C4 */
function taintOf(frame: Frame): StepDetail["taint"] {
  const marks: StepDetail["taint"] = [];
  for (const f of findAllTaint(frame.input)) marks.push({ where: "input", ...f });
  for (const f of findAllTaint(frame.output)) marks.push({ where: "output", ...f });
  return marks;
}

/** C5: the event before `first`, when the log holds 0..first-1 whole. */
function forkPoint(events: readonly Envelope[], first: number | undefined): number | undefined {
  if (first === undefined || first < 1) return undefined;
  let expected = 0;
  for (const e of events) {
    if (e.seq >= first) break;
    if (e.seq !== expected) return undefined;
    expected++;
  }
  return expected === first ? first - 1 : undefined;
}
