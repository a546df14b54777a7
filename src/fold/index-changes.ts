/**
 * What a batch of envelopes changes in a store's indexes (its due-timer table).
 *
 * Stores keep a timer row per wait with a wake time so that a sleeping or suspended execution is
 * found when it is due, by any process. The rows are derived from the events in the same
 * transaction as the append, so a durable TIMER_SCHEDULED always has its row. A row whose wait
 * was settled another way (a suspend answered before its timeout) is stale and harmless: the
 * runtime deletes it when it comes due and finds nothing to fire.
 */
import { isTerminalEvent, type Envelope } from "../kernel/events.ts";
import { isPlainObject } from "../kernel/json.ts";
import { readRestored } from "./restored.ts";

export interface TimerRow {
  timerId: string;
  wakeAtMs: number;
}

export interface IndexChanges {
  timersSet: TimerRow[];
  timersCleared: string[];
  /** A terminal event: every timer row of the execution goes. */
  clearAllTimers: boolean;
}

/** The index changes of a batch, or undefined when it changes none (most batches). */
export function indexChanges(events: readonly Envelope[]): IndexChanges | undefined {
  if (!events.some(touchesIndex)) return undefined;
  const out: IndexChanges = { timersSet: [], timersCleared: [], clearAllTimers: false };
  for (const e of events) {
    const p = isPlainObject(e.payload) ? e.payload : {};
    const callId = p.callId;
    if (isTerminalEvent(e)) out.clearAllTimers = true;
    if (e.kind === "STATE_RESTORED" && e.meta?.kernel === true) {
      // The restored waits get rows; an old wait's row is stale and harmless (see above).
      const record = readRestored(p.state);
      if (typeof record === "string") continue;
      for (const [timerId, f] of Object.entries(record.frames)) {
        if (f.status === "waiting" && f.wakeAtMs !== undefined) {
          out.timersSet.push({ timerId, wakeAtMs: f.wakeAtMs });
        }
      }
      continue;
    }
    if (typeof callId !== "string") continue;
    if (
      (e.kind === "TIMER_SCHEDULED" || e.kind === "SUSPENDED") &&
      typeof p.wakeAtMs === "number"
    ) {
      out.timersSet.push({ timerId: callId, wakeAtMs: p.wakeAtMs });
    } else if (e.kind === "TIMER_FIRED") {
      out.timersCleared.push(callId);
    }
  }
  return out;
}

function touchesIndex(e: Envelope): boolean {
  return (
    e.kind === "TIMER_SCHEDULED" ||
    e.kind === "SUSPENDED" ||
    e.kind === "TIMER_FIRED" ||
    e.kind === "STATE_RESTORED" ||
    isTerminalEvent(e)
  );
}
