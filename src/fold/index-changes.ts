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
import { openAttachedChildren } from "./children.ts";
import { chainOf, type ExecutionState } from "./state.ts";

export interface TimerRow {
  timerId: string;
  wakeAtMs: number;
}

export interface IndexChanges {
  timersSet: TimerRow[];
  timersCleared: string[];
  /** A terminal event: every timer row of the execution goes. */
  clearAllTimers: boolean;
  /** Timer rows of OTHER executions, written in this batch's transaction (W1, W2). */
  wakes?: WakeRow[];
  /** The origin a fork's batch copied, and its fork point: the store's fork row (W4). */
  forkedFrom?: { executionId: string; seq: number };
}

/** A due timer row for another execution: its supervisor acts on it (runtime/children.ts). */
export interface WakeRow extends TimerRow {
  executionId: string;
}

/** The timer id of a wake row telling a parent that its child `childId` ended (W1). */
export const childWakeId = (childId: string) => `child:${childId}`;
/** The timer id of a wake row telling a child that its parent `parentId` ended (W2). */
export const cascadeWakeId = (parentId: string) => `cascade:${parentId}`;

/**
 * The timer id of an execution's row watching a child it holds a slot for but whose end
 * wakes another execution (W3): a fork's copy of its origin's spawn.
 */
export const watchWakeId = (childId: string) => `watch:${childId}`;

/** How the ids of the supervisor's rows begin (W1..W3): an execution's own end never clears them. */
export const WAKE_ID_PREFIXES = ["child:", "cascade:", "watch:"] as const;

/** Whether a timer row is a supervisor's wake row, which an execution's own end never clears. */
export const isWakeId = (timerId: string): boolean =>
  WAKE_ID_PREFIXES.some((prefix) => timerId.startsWith(prefix));

/**
 * The index changes of a batch, or undefined when it changes none (most batches). `state` is the
 * execution's state after the batch: with it, a terminal batch also wakes the supervisors.
 * W1. A chain member that ends completed, failed or cancelled, and was spawned, wakes its
 *     parent's chain (its id, routed to the head when fired) with `child:<chainId>` (the id the
 *     parent spawned: a continued child's head ends the original slot).
 * W2. One that is cancelled or continues wakes each attached child whose slot is open with
 *     `cascade:<its id>`.
 * W3. A fork holds copies of its origin's open slots, whose children wake the origin only: its
 *     copy writes an own row `watch:<childId>` for each (runtime/fork.ts), and so does a restore
 *     for each wait on a child it restores, due at once, which the
 *     supervisor moves on (store S16) until the child has ended, then settles the slot in the
 *     fork's chain head. Like a wake row, the fork's own end does not clear it (a fork that
 *     continues hands the slot on); it goes once the chain's head no longer holds the slot open.
 * W4. A batch holding a fork point's envelope (its `meta.forkedFrom.seq` is its own seq, as the
 *     fold reads it: fork-point.ts F12) records its origin and fork point as `forkedFrom`: the
 *     store keeps a row per fork under its origin (store S21), so an execution lists its forks.
 */
export function indexChanges(
  events: readonly Envelope[],
  state?: ExecutionState,
): IndexChanges | undefined {
  if (!events.some(touchesIndex)) return undefined;
  const out: IndexChanges = { timersSet: [], timersCleared: [], clearAllTimers: false };
  const forkPoint = events.map(forkOrigin).find((origin) => origin !== undefined);
  if (forkPoint) out.forkedFrom = forkPoint;
  const end = state ? events.find(isTerminalEvent) : undefined;
  if (state && end) {
    const wakes = wakesOf(state, end);
    if (wakes.length > 0) out.wakes = wakes;
  }
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
        // W3: a restored wait on a child is watched (the child's end may wake another id).
        if (f.status === "waiting" && f.kind === "child" && f.childId !== undefined) {
          out.timersSet.push({ timerId: watchWakeId(f.childId), wakeAtMs: e.at });
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

/** W4: the origin and fork point `e` names when it is a fork point's envelope. */
function forkOrigin(e: Envelope): { executionId: string; seq: number } | undefined {
  const from = isPlainObject(e.meta) ? e.meta.forkedFrom : undefined;
  if (!isPlainObject(from) || typeof from.executionId !== "string" || from.seq !== e.seq) {
    return undefined;
  }
  return { executionId: from.executionId, seq: e.seq };
}

function touchesIndex(e: Envelope): boolean {
  return (
    // W4: a step's envelope has no `forkedFrom`: one property read, no more.
    (e.meta?.forkedFrom !== undefined && forkOrigin(e) !== undefined) ||
    e.kind === "TIMER_SCHEDULED" ||
    e.kind === "SUSPENDED" ||
    e.kind === "TIMER_FIRED" ||
    e.kind === "STATE_RESTORED" ||
    isTerminalEvent(e)
  );
}

function wakesOf(state: ExecutionState, end: Envelope): WakeRow[] {
  const wakes: WakeRow[] = [];
  const wakeAtMs = end.at;
  if (state._parent && end.kind !== "EXECUTION_CONTINUED") {
    const timerId = childWakeId(chainOf(state).chainId);
    // The parent's chain: routed to its head when it fires (the spawning generation may have
    // continued, or been released by retention).
    wakes.push({ executionId: state._parent.chainId, timerId, wakeAtMs });
  }
  if (end.kind === "EXECUTION_CANCELLED" || end.kind === "EXECUTION_CONTINUED") {
    for (const childId of openAttachedChildren(state)) {
      wakes.push({ executionId: childId, timerId: cascadeWakeId(state.executionId), wakeAtMs });
    }
  }
  return wakes;
}
