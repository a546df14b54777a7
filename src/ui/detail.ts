/**
 * `GET /api/executions/:id`: everything the execution page shows, in one answer.
 *
 * Invariants (tests cite D1..D3):
 * D1. The state and the events agree: the state is read first (snapshot plus tail, authorized
 *     as an anonymous caller), the log after it, and the events the log has past the state are
 *     folded onto it, so both end at the same sequence number.
 * D2. The bars, the resources and the timeline rows are projections of that log and state
 *     (analytics/), computed over the whole log; the answer carries at most MAX_EVENTS_SHOWN of
 *     its newest events and their rows, and says how many it left out.
 * D3. `nowMs` is the runtime clock's time when the answer was made: a page draws running bars
 *     up to it, not up to the browser's clock.
 */
import { executionBars, type BarsView } from "../analytics/bars.ts";
import { resourceUsage, type BudgetUsage } from "../analytics/resource-usage.ts";
import { timeline, type TimelineRow } from "../analytics/timeline.ts";
import { fold } from "../fold/fold.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { Envelope, ExecutionStatus } from "../kernel/events.ts";
import type { Runtime } from "../runtime/runtime.ts";
import type { ChildTree } from "../analytics/child-tree.ts";
import { chainView, childrenView, type ChainView } from "./relations.ts";

export const MAX_EVENTS_SHOWN = 1000;

export interface DetailSummary {
  executionId: string;
  flow: string;
  status: ExecutionStatus;
  head: number;
  startedAtMs: number;
  updatedAtMs: number;
}

/** What changes as the log grows: the part of a detail a live update carries again. */
export interface Projection {
  summary: DetailSummary;
  state: ExecutionState;
  bars: BarsView;
  resources: BudgetUsage[];
}

export interface ExecutionDetail extends Projection {
  events: Envelope[];
  timeline: TimelineRow[];
  /** How many older events the answer left out (D2). */
  omittedEvents: number;
  chain: ChainView | null;
  children: ChildTree;
  nowMs: number;
}

/** Folds the events of `events` that follow `state` onto it (D1); returns it. */
export function catchUp(state: ExecutionState, events: readonly Envelope[]): ExecutionState {
  for (const e of events) if (e.seq === state.seq + 1) fold(state, e);
  return state;
}

export function projectionOf(state: ExecutionState, events: readonly Envelope[]): Projection {
  return {
    summary: {
      executionId: state.executionId,
      flow: state.flow,
      status: state.status,
      head: state.seq,
      startedAtMs: state.startedAt,
      updatedAtMs: state.updatedAt,
    },
    state,
    bars: executionBars(events, state),
    resources: resourceUsage(state),
  };
}

export async function executionDetail(runtime: Runtime, id: string): Promise<ExecutionDetail> {
  const loaded = await runtime.getState(id);
  const events = await runtime.readLog(id);
  const state = catchUp(loaded, events);
  const rows = timeline(events);
  const shown = Math.min(events.length, MAX_EVENTS_SHOWN);
  const chain = await chainView(runtime, state);
  return {
    ...projectionOf(state, events),
    events: events.slice(events.length - shown),
    timeline: rows.slice(rows.length - shown),
    omittedEvents: events.length - shown,
    chain: chain ?? null,
    children: await childrenView(runtime, state),
    nowMs: runtime.clock.now(),
  };
}
