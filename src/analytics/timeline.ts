/**
 * A readable timeline of a log: one row per event, with the time since the start and what the
 * event means in words. A pure projection (no Node, no clock).
 */
import type { Envelope } from "../kernel/events.ts";
import { isPlainObject, type Json } from "../kernel/json.ts";
import { formatUsd } from "./numbers.ts";

export interface TimelineRow {
  seq: number;
  /** Milliseconds since sequence 0. */
  offsetMs: number;
  kind: string;
  text: string;
}

export function timeline(events: readonly Envelope[]): TimelineRow[] {
  const t0 = events[0]?.at ?? 0;
  return events.map((e) => ({ seq: e.seq, offsetMs: e.at - t0, kind: e.kind, text: describe(e) }));
}

function describe(e: Envelope): string {
  const p = isPlainObject(e.payload) ? e.payload : {};
  const call = typeof p.callId === "string" ? p.callId : "";
  switch (e.kind) {
    case "EXECUTION_STARTED":
      return `flow ${text(p.flow)} v${text(p.flowVersion)} started with ${brief(p.input)}`;
    case "STEP_STARTED":
      return `step ${call} started`;
    case "STEP_COMPLETED":
      return `step ${call} -> ${brief(p.output)}`;
    case "STEP_FAILED":
      if (p.retrying === true) {
        return `step ${call} attempt ${text(p.attempt)} failed: ${errorText(p.error)}; retrying in ${text(p.retryInMs)} ms`;
      }
      return `step ${call} failed: ${errorText(p.error)}`;
    case "DECISION_RECORDED":
      return `decision ${call} = ${brief(p.value)}`;
    case "TIMER_SCHEDULED":
      return `sleep ${call} for ${inMs(p.wakeAtMs, e.at)}`;
    case "TIMER_FIRED":
      return `timer ${call} fired`;
    case "SUSPENDED":
      return `suspended at ${call}${typeof p.wakeAtMs === "number" ? ` (times out in ${inMs(p.wakeAtMs, e.at)})` : ""}`;
    case "RESUMED":
      return `resumed with ${brief(p.payload)}`;
    case "EXECUTION_COMPLETED":
      return `completed -> ${brief(p.output)}`;
    case "EXECUTION_FAILED":
      return `failed: ${errorText(p.error)}`;
    case "RESOURCE_METERED":
      return `step ${call} metered ${amounts(p.delta)}`;
    case "QUOTA_EXCEEDED":
      return `step ${call} refused: ${text(p.dimension)} budget${p.limit === undefined ? "" : ` of ${text(p.limit)}`} exceeded${p.estimated === true ? " (an estimate, mid-stream)" : ""}`;
    case "STEP_CANCELLED":
      return `step ${call} cancelled`;
    case "STEP_NOTED":
      return `step ${call} attempt ${text(p.attempt)} noted ${brief(p.note)}`;
    case "EXECUTION_CANCELLED":
      return `cancelled: ${text(p.reason)}`;
    case "EXECUTION_CONTINUED":
      return `continued as ${text(p.successorId)} (generation ${text(p.generation)} of chain ${text(p.chainId)})`;
    case "STATE_RESTORED": {
      const frames = isPlainObject(p.state) && isPlainObject(p.state.frames) ? p.state.frames : {};
      // Besides frames, the values of calls kept without one (schema 1.13.0, fold/settled.ts).
      const lean =
        isPlainObject(p.state) && isPlainObject(p.state._settled) ? p.state._settled : {};
      const kept = Object.values(lean).reduce<number>(
        (n, v) => n + (isPlainObject(v) ? Object.keys(v).length : 0),
        0,
      );
      return `state restored (${Object.keys(frames).length + kept} recorded calls); driven on by flow ${text(p.flow)} v${text(p.flowVersion)}`;
    }
    case "MESSAGE_CONSUMED":
      return p.duplicate === true
        ? `message ${text(p.seq)} (key ${text(p.key)}) dropped: its key was already consumed`
        : `${call} took message ${text(p.seq)} of ${text(p.topic)}: ${brief(p.payload)}`;
    default:
      return brief(e.payload);
  }
}

function text(v: Json | undefined): string {
  return typeof v === "string" || typeof v === "number" ? String(v) : brief(v);
}

/**
 * A metered delta in words: "64 in / 57 out tokens, $0.001047 (claude-sonnet-4-6), 412 ms wall
 * (an estimate)"; a call that could not be priced says so (issue 20).
 */
function amounts(v: Json | undefined): string {
  if (!isPlainObject(v)) return brief(v);
  const parts: string[] = [];
  for (const [k, x] of Object.entries(v)) {
    if (k === "estimated" || k === "priced" || k === "costUnknown") continue;
    if (k === "tokens" && isPlainObject(x)) {
      parts.push(`${text(x.input ?? 0)} in / ${text(x.output ?? 0)} out tokens`);
    } else if (k === "costUsd" && typeof x === "number") {
      const model = isPlainObject(v.priced) ? v.priced.model : undefined;
      parts.push(`${formatUsd(x)}${typeof model === "string" ? ` (${model})` : ""}`);
    } else if (k === "wallMs" || k === "ms")
      parts.push(`${text(x)} ms${k === "wallMs" ? " wall" : ""}`);
    else if (k === "memBytes" || k === "netBytes") parts.push(`${text(x)} bytes ${k.slice(0, 3)}`);
    else parts.push(`${k} ${brief(x)}`);
  }
  if (v.costUnknown === true) parts.push("cost unknown (could not be priced)");
  return `${parts.join(", ")}${v.estimated === true ? " (an estimate)" : ""}`;
}

function inMs(wakeAtMs: Json | undefined, at: number): string {
  return typeof wakeAtMs === "number" ? `${wakeAtMs - at} ms` : "an unknown time";
}

function errorText(v: Json | undefined): string {
  if (isPlainObject(v)) return `${text(v.name)}: ${text(v.message)}`;
  return "unknown error";
}

function brief(v: Json | undefined, max = 80): string {
  if (v === undefined) return "nothing";
  const text = JSON.stringify(v);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
