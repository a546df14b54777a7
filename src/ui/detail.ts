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
 * D4. The answer carries the execution's lineage (lineage.ts) and the actions that apply to it
 *     now (applicable.ts Y1..Y3), computed from the same state; a live update carries them too.
 * D5. It carries `waiting` when the execution waits in a queue or on a limiter (flow-control.ts
 *     FC2), read when the answer is made.
 */
import { executionBars } from "../analytics/bars.ts";
import { resourceUsage } from "../analytics/resource-usage.ts";
import { timeline } from "../analytics/timeline.ts";
import { fold } from "../fold/fold.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { Envelope } from "../kernel/events.ts";
import type { Runtime } from "../runtime/runtime.ts";
import type { ExecutionDetail, Projection } from "./api-types.ts";
import { applicableActions } from "./applicable.ts";
import { lineageOf } from "./lineage.ts";
import { chainView, childrenView } from "./relations.ts";
import { withWaits } from "./flow-control.ts";

export const MAX_EVENTS_SHOWN = 1000;

export type { DetailSummary, ExecutionDetail, Projection } from "./api-types.ts";

/** Folds the events of `events` that follow `state` onto it (D1); returns it. */
export function catchUp(state: ExecutionState, events: readonly Envelope[]): ExecutionState {
  for (const e of events) if (e.seq === state.seq + 1) fold(state, e);
  return state;
}

/** The projection of `state` and its log, with its lineage and what the page may do (Y1..Y3). */
export async function projectionOf(
  runtime: Runtime,
  state: ExecutionState,
  events: readonly Envelope[],
  readOnly: boolean,
): Promise<Projection> {
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
    lineage: await lineageOf(runtime, state),
    actions: await applicableActions(runtime, state, events, readOnly),
  };
}

export async function executionDetail(
  runtime: Runtime,
  id: string,
  readOnly = false,
): Promise<ExecutionDetail> {
  const loaded = await runtime.getState(id);
  const events = await runtime.readLog(id);
  const state = catchUp(loaded, events);
  const rows = timeline(events);
  const shown = Math.min(events.length, MAX_EVENTS_SHOWN);
  const chain = await chainView(runtime, state);
  // D5
  const [waits] = await withWaits(runtime, [
    { executionId: state.executionId, status: state.status },
  ]);
  return {
    ...(await projectionOf(runtime, state, events, readOnly)),
    events: events.slice(events.length - shown),
    timeline: rows.slice(rows.length - shown),
    omittedEvents: events.length - shown,
    chain: chain ?? null,
    children: await childrenView(runtime, state),
    ...(waits?.waiting === undefined ? {} : { waiting: waits.waiting }),
    nowMs: runtime.clock.now(),
  };
}
