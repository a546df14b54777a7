/**
 * `loom run`'s progress: one line on stderr for each step as it ends, and for each wait (a
 * sleep, a suspend, a receive) as it begins and ends, read from the execution's log while the
 * command waits for the outcome.
 *
 * Invariants:
 * P1. Cheap: a tick reads the log's head (one point read) and only the events after the last
 *     one seen, every PROGRESS_POLL_MS; nothing else is read while nothing happens.
 * P2. Each event is reported at most once, in log order; `stop()` reads the tail one last time,
 *     so every event before the outcome is reported before the command prints the outcome.
 * P3. It follows a chain (ADR 0109): an EXECUTION_CONTINUED moves the watch to the successor.
 * P4. It never fails the command: a read that fails (the runtime closing, a sealed payload it
 *     cannot open) ends the watch silently; the outcome, not the progress, is the answer.
 *
 * There is no runtime hook for "an event was appended" (a resume from another process appends
 * in that process anyway), so the log is polled.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Envelope } from "../kernel/events.ts";
import { isPlainObject, type Json } from "../kernel/json.ts";
import type { Runtime } from "../runtime/runtime.ts";
import type { Io } from "./io.ts";

export const PROGRESS_POLL_MS = 100;

export interface ProgressWatch {
  /** Reports what was appended since the last tick, then stops (P2). */
  stop(): Promise<void>;
}

/**
 * Watches `id`'s log from sequence `fromSeq` on, writing a line to `io.err` for each event that
 * progressLine describes.
 */
export function watchProgress(
  runtime: Runtime,
  id: string,
  fromSeq: number,
  io: Pick<Io, "err">,
): ProgressWatch {
  const stopping = new AbortController();
  let current = id;
  let next = fromSeq;
  let failed = false;
  const starts = new Map<string, number>();
  const tick = async (): Promise<void> => {
    // Chain successors one after the other, within one tick (P3).
    for (let hops = 0; hops < 100 && !failed; hops++) {
      const head = await runtime.store.head(current);
      if (head < next) return;
      let successor: string | undefined;
      for (const e of await runtime.store.read(current, next)) {
        next = e.seq + 1;
        const line = progressLine(e, starts);
        if (line !== undefined) io.err(line);
        if (e.kind === "EXECUTION_CONTINUED") successor = successorOf(e);
      }
      if (successor === undefined) return;
      current = successor;
      next = 1; // The successor's EXECUTION_STARTED is not a step.
      starts.clear();
    }
  };
  const guarded = () => tick().catch(() => void (failed = true)); // P4
  const loop = (async () => {
    while (!stopping.signal.aborted && !failed) {
      await guarded();
      await sleep(PROGRESS_POLL_MS, undefined, { signal: stopping.signal }).catch(() => undefined);
    }
  })();
  let stopped: Promise<void> | undefined;
  return {
    stop() {
      stopping.abort();
      stopped ??= loop.then(() => (failed ? undefined : guarded()));
      return stopped;
    },
  };
}

/**
 * The progress line for one event, or undefined for one that is not a step's end or a wait.
 * `starts` holds the start time of each step whose STEP_STARTED was seen (a step's start is
 * usually folded into its end, as `startedAt`, left out when it is the end's own time), so its
 * duration can be given.
 */
export function progressLine(e: Envelope, starts: Map<string, number>): string | undefined {
  const p = isPlainObject(e.payload) ? e.payload : {};
  const call = typeof p.callId === "string" ? p.callId : "?";
  const took = (): string => {
    // A settling event without `startedAt` and no start seen started at its own time (1.11.0).
    const started = typeof p.startedAt === "number" ? p.startedAt : (starts.get(call) ?? e.at);
    starts.delete(call);
    return ` in ${Math.max(0, e.at - started)} ms`;
  };
  switch (e.kind) {
    case "STEP_STARTED":
      starts.set(call, typeof p.startedAt === "number" ? p.startedAt : e.at);
      return undefined;
    case "STEP_COMPLETED":
      return `  step ${call} completed${took()}`;
    case "STEP_FAILED":
      if (p.retrying === true) {
        const attempt = typeof p.attempt === "number" ? ` attempt ${p.attempt}` : "";
        const retry = typeof p.retryInMs === "number" ? ` in ${p.retryInMs} ms` : "";
        return `  step ${call}${attempt} failed${took()}: ${errorOf(p.error)}; retrying${retry}`;
      }
      return `  step ${call} failed${took()}: ${errorOf(p.error)}`;
    case "STEP_CANCELLED":
      starts.delete(call);
      return `  step ${call} cancelled`;
    case "TIMER_SCHEDULED":
      return `  ${call} sleeping${typeof p.wakeAtMs === "number" ? ` ${p.wakeAtMs - e.at} ms` : ""}`;
    case "TIMER_FIRED":
      return `  ${call} woke`;
    case "SUSPENDED": {
      const what = p.name === "receive" ? `a message on topic ${text(p.topic)}` : "a resume";
      const timeout =
        typeof p.wakeAtMs === "number" ? ` (times out in ${p.wakeAtMs - e.at} ms)` : "";
      return `  ${call} waiting for ${what}${timeout}`;
    }
    case "RESUMED":
      return "  resumed";
    case "MESSAGE_CONSUMED":
      return p.duplicate === true ? undefined : `  ${call} took message ${text(p.seq)}`;
    case "CHILD_STARTED":
      return `  ${call} started child ${text(p.childId)}`;
    case "CHILD_DONE": {
      const status = isPlainObject(p.outcome) ? p.outcome.status : undefined;
      return `  child ${text(p.childId)} ${typeof status === "string" ? status : "ended"}`;
    }
    case "EXECUTION_CONTINUED":
      return undefined; // run.ts says it, once, whether or not progress is shown.
    default:
      return undefined;
  }
}

function successorOf(e: Envelope): string | undefined {
  const p = isPlainObject(e.payload) ? e.payload : {};
  return typeof p.successorId === "string" ? p.successorId : undefined;
}

function errorOf(error: Json | undefined): string {
  if (!isPlainObject(error)) return "unknown error";
  return `${text(error.name)}: ${text(error.message)}`;
}

function text(v: Json | undefined): string {
  return typeof v === "string" || typeof v === "number" ? String(v) : JSON.stringify(v ?? null);
}
