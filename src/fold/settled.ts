/**
 * Plainly settled calls (schema 1.13.0, issue 28): of a call that settled the usual way, a
 * generation keeps its value alone. A conversation's generation of 500 turns held about 200 KB
 * of frames whose every field but the value is read only while the call is open.
 *
 * Invariants (tests cite L1..L5):
 * L1. In an execution whose EXECUTION_STARTED records schema 1.13.0 or later (`_settled` is there
 *     from its start, start.ts), a call that settles plainly gives up its frame and keeps its
 *     value only, in `_settled[kind][callId]`: a step completed at its first attempt, with an
 *     output and no input; a suspend resumed; a receive that got its message. Only when its
 *     call id gives its scope and name (`<scope><name>#<n>`, S5). Every other call keeps its
 *     frame, as every call of an earlier log does, so an earlier log folds as it always did.
 * L2. Why a generation never needs the rest. A replay asks each call again, by kind and id, which
 *     `order` checks (R3), and is handed the value (R2): nothing else of a settled call is read.
 *     Its scope and name are its id's. Its status is its kind's plain one. Its input is compared
 *     when asked again (D1), so a step with one keeps its frame. Its start time, attempt count,
 *     reservation (S3) and notes (S4), a receive's topic and a wait's wake time are read only
 *     while the call is open: a step's timeout (K8.3), its next attempt's number, a crashed
 *     attempt's charge, the inbox's delivery, the timer that ends a wait. Whoever shows a call
 *     (the CLI, analytics, the dashboard) reads its times from the log's events; once a
 *     compaction deleted them, a call kept by its value shows no start (analytics/bars.ts V4).
 * L3. A call id in `_settled` is recorded: an event that would open or settle it again is inert,
 *     as it is for a settled frame (`isRecorded`).
 * L4. `callFrame` gives every reader one view of a call however it is kept: its frame, or the
 *     frame its value stands for (its kind's plain status, one attempt, no start time).
 * L5. `_settled` is part of the body's replay record: a restore replaces it with the frames
 *     (restored.ts R1) and an erasure empties it (runtime/erase-redacted.ts X5c).
 */
import { EVENT_SCHEMA_VERSION, type CallKind } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import { stepHeadOf } from "./frames.ts";
import type { ExecutionState, Frame, FrameStatus, LeanKind, SettledCalls } from "./state.ts";

/** Each lean kind's plain outcome: the status its value stands for (L4). */
const PLAIN: Readonly<Record<LeanKind, FrameStatus>> = {
  step: "completed",
  suspend: "resumed",
  receive: "received",
};

export const LEAN_KINDS: readonly LeanKind[] = ["step", "suspend", "receive"];

/** The first schema version that keeps plainly settled calls by their value (L1). */
export const LEAN_SINCE: readonly [number, number, number] = [1, 13, 0];

/** Whether a start recording `version` (`"1.13.0"`) keeps plainly settled calls lean (L1). */
export function leanSince(version: unknown): boolean {
  // What this runtime writes, the start of nearly every fold, is answered without parsing it.
  if (version === EVENT_SCHEMA_VERSION) return true;
  if (typeof version !== "string") return false;
  const parts = version.split(".").map(Number);
  for (let i = 0; i < LEAN_SINCE.length; i++) {
    const part = parts[i] ?? 0;
    if (!Number.isSafeInteger(part)) return false;
    const since = LEAN_SINCE[i] ?? 0;
    if (part !== since) return part > since;
  }
  return true;
}

const isLean = (kind: CallKind): kind is LeanKind => Object.hasOwn(PLAIN, kind);

/**
 * L1: the call `callId` just settled with frame `f`; when that is a plain settling, in a lean
 * execution, the frame goes and its value is kept in `_settled`.
 */
export function keepValueOnly(s: ExecutionState, callId: string, f: Frame): void {
  const lean = s._settled;
  if (lean === undefined || !isLean(f.kind) || PLAIN[f.kind] !== f.status) return;
  if (f.output === undefined || f.input !== undefined || f.attempts !== 1) return;
  const head = stepHeadOf(callId);
  if (head === undefined || head.scope !== f.scope || head.name !== f.name) return;
  delete s.frames[callId];
  (lean[f.kind] ??= {})[callId] = f.output;
}

/** L3: whether the log recorded call `callId` (a frame, or a value kept alone). */
export function isRecorded(s: ExecutionState, callId: string): boolean {
  return Object.hasOwn(s.frames, callId) || leanKindOf(s, callId) !== undefined;
}

function leanKindOf(s: ExecutionState, callId: string): LeanKind | undefined {
  const lean = s._settled;
  if (lean === undefined) return undefined;
  for (const kind of LEAN_KINDS) {
    const values = lean[kind];
    if (values !== undefined && Object.hasOwn(values, callId)) return kind;
  }
  return undefined;
}

/**
 * L2: the value of call `callId` when it is kept alone as a call of `kind` (it settled plainly),
 * else undefined (a kept value is never undefined). What a replay is handed, without the frame
 * `callFrame` would make for it.
 */
export function keptValue(s: ExecutionState, kind: LeanKind, callId: string): Json | undefined {
  const values = s._settled?.[kind];
  return values !== undefined && Object.hasOwn(values, callId) ? values[callId] : undefined;
}

/** L4: the frame of call `callId`, recorded or stood for by its kept value; undefined if none. */
export function callFrame(s: ExecutionState, callId: string): Frame | undefined {
  if (Object.hasOwn(s.frames, callId)) return s.frames[callId];
  const kind = leanKindOf(s, callId);
  const head = kind === undefined ? undefined : stepHeadOf(callId);
  if (kind === undefined || head === undefined) return undefined;
  const output = s._settled?.[kind]?.[callId];
  const frame: Frame = {
    kind,
    scope: head.scope,
    name: head.name,
    status: PLAIN[kind],
    attempts: 1,
  };
  if (output !== undefined) frame.output = output;
  return frame;
}

/**
 * Every call the state records with its frame (L4), decisions aside: in the order the calls were
 * made within each scope when some are kept lean, else in the order their frames were made.
 */
export function callsOf(s: ExecutionState): [string, Frame][] {
  if (s._settled === undefined) return Object.entries(s.frames);
  const out: [string, Frame][] = [];
  const seen = new Set<string>();
  for (const entries of Object.values(s.order)) {
    for (const entry of entries) {
      const callId = entry.slice(entry.indexOf(":") + 1);
      const frame = seen.has(callId) ? undefined : callFrame(s, callId);
      if (frame === undefined) continue;
      seen.add(callId);
      out.push([callId, frame]);
    }
  }
  // A restored record's frames need not be in its order (restored.ts): none is left out.
  for (const [callId, frame] of Object.entries(s.frames)) {
    if (!seen.has(callId)) out.push([callId, frame]);
  }
  return out;
}

/** The number of calls `_settled` keeps by their value (L1). */
export function settledCount(lean: SettledCalls | undefined): number {
  let n = 0;
  for (const kind of LEAN_KINDS) n += Object.keys(lean?.[kind] ?? {}).length;
  return n;
}
