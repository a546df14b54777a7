/**
 * The dashboard's JSON API as types: what each endpoint answers and takes. The server's modules
 * build these, and the browser client (src/ui/client/) imports them with `import type`, so the
 * two are checked against each other by one `tsc` run. Types only: nothing here runs.
 *
 * Every endpoint answers an error as `{ error: { code, message } }` with its HTTP status
 * (http.ts H1); the client shows the message.
 */
import type { BarsView } from "../analytics/bars.ts";
import type { ChildTree } from "../analytics/child-tree.ts";
import type { BudgetUsage } from "../analytics/resource-usage.ts";
import type { TimelineRow } from "../analytics/timeline.ts";
import type { ErrorData } from "../kernel/errors.ts";
import type { Envelope, ExecutionStatus } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import type { Budget, ResourceSnapshot } from "../kernel/resources.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { ExecutionSummary } from "../store/spi.ts";
import type { ChainLineage } from "../analytics/chain-lineage.ts";
import type { LimiterRow, QueueRow, WaitReason } from "../runtime/flow-control-types.ts";

export type { StepAttempt, StepDetail } from "../analytics/step-detail.ts";
export type { Conversation } from "../analytics/conversation.ts";
export type { ExecutionStatus, Json, ErrorData, Budget, ResourceSnapshot };
export type { LimiterRow, QueueRow, WaitReason };

// ---- GET /api/executions -------------------------------------------------------------------

/**
 * Query: `status=a,b`, `flow=f`, `q=<id prefix>`, `principal=p`, `sort=id|created|updated|cost`,
 * `order=asc|desc`, `minCostUsd=n`, `createdFromMs=n`, `createdToMs=n`, `after=<next of the
 * previous page, opaque>`, `limit=1..200`.
 */
export interface ListRow extends ExecutionSummary {
  principal?: string;
  /** What the execution has spent so far (its folded `_resources`). */
  costUsd?: number;
  /** A lower bound: some call could not be priced. */
  costUnknown?: boolean;
  /** Input plus output tokens. */
  tokens?: number;
  /** Where it waits, when it waits in a queue or on a rate limiter (runtime.waits(), FV4). */
  waiting?: WaitReason;
}

export interface ListAnswer {
  executions: ListRow[];
  /** The cursor of the next page (opaque: pass it back as `after`), or null on the last page. */
  next: string | null;
  nowMs: number;
}

/** An execution's chain (relations.ts R1): its generations, and where routing sends now. */
export interface ChainView extends ChainLineage {
  /** Where routing sends a resume, send or cancel addressed to the shown id now. */
  routedHead?: string;
  /** The walk stopped at MAX_GENERATIONS (R1). */
  partial: boolean;
}

// ---- GET /api/executions/:id (detail.ts) ------------------------------------------------------

export interface DetailSummary {
  executionId: string;
  flow: string;
  status: ExecutionStatus;
  head: number;
  startedAtMs: number;
  updatedAtMs: number;
}

/**
 * What changes as the log grows: the part of a detail a live update (live.ts) carries again,
 * its lineage and applicable actions included.
 */
export interface Projection {
  summary: DetailSummary;
  state: ExecutionState;
  bars: BarsView;
  resources: BudgetUsage[];
  lineage: Lineage;
  actions: ApplicableActions;
}

export interface ExecutionDetail extends Projection {
  events: Envelope[];
  timeline: TimelineRow[];
  /** How many older events the answer left out (detail.ts D2). */
  omittedEvents: number;
  chain: ChainView | null;
  children: ChildTree;
  /** Where it waits, when it waits in a queue or on a rate limiter (runtime.waits(), FV4). */
  waiting?: WaitReason;
  nowMs: number;
}

/** Which of the page's actions apply now (a read-only server: all false). */
export interface ApplicableActions {
  cancel: boolean;
  /** Only while parked at a suspend that a resume settles, never while inside a step. */
  resume: boolean;
  send: boolean;
  fork: boolean;
  /** The dashboard's runtime has the flow registered (`loom ui --module M`). */
  rerun: boolean;
}

/** The executions this one came from and led to, each linked both ways. */
export interface Lineage {
  forkedFrom?: { executionId: string; seq: number };
  /** The forks made of this execution, oldest first, each with its fork point. */
  forks: { executionId: string; seq: number }[];
  continuedFrom?: string;
  continuedTo?: string;
  parent?: string;
}

// ---- GET /api/executions/:id/call?call=<callId> ---------------------------------------------

// StepDetail, StepAttempt and Conversation are the pure projections' own types
// (analytics/step-detail.ts, analytics/conversation.ts), which `loom show --step` prints too.
// A call whose payloads are sealed with a key this dashboard does not hold answers
// `{ callId, sealed: true, ... }` with nothing from the log: `kind` "step", `status` "sealed",
// `name` and `scope` read from the call id, no input, output, attempts or sequence numbers.

// ---- actions: POST /api/executions/:id/{cancel,resume,send,fork,rerun} ------------------------

export interface ForkRequest {
  atSequence: number;
  newId?: string;
  budget?: Budget;
  keepDeadline?: boolean;
}

export interface RerunRequest {
  /** Absent: the same input as the execution's. Checked by the flow's schema when it has one. */
  input?: Json;
  newId?: string;
}

/**
 * What a fork or a rerun made: the new execution, its clock and its budget, from its state.
 * `deadlineMs` counts from `startedAtMs` (a fork's own clock base unless it kept its origin's).
 */
export interface MadeExecution {
  executionId: string;
  startedAtMs: number;
  deadlineMs?: number;
  budget?: Budget;
  spent: ResourceSnapshot;
}

// ---- GET /api/flows -------------------------------------------------------------------------

export interface FlowsAnswer {
  flows: { name: string; version: string; hasInputSchema: boolean }[];
}

// ---- GET /api/schedules, POST /api/schedules/:id/{pause,resume} -----------------------------

export interface ScheduleRow {
  name: string;
  flow: string;
  cron: string;
  timezone: string;
  input?: Json;
  paused: boolean;
  /** The next occurrences (runtime clock, ms), soonest first; none while paused. */
  next: number[];
  /** The latest occurrence started, when one was. */
  lastStartedMs?: number;
  principal?: string;
}

export interface SchedulesAnswer {
  schedules: ScheduleRow[];
  nowMs: number;
}

// ---- GET /api/fleet -------------------------------------------------------------------------

export interface FleetMemberRow {
  owner: string;
  flows: string[];
  startedAtMs: number;
  lastHeartbeatMs: number;
  host?: string;
  pid?: number;
  /** The leases it holds now: the executions it drives. */
  leases: { executionId: string; fence: number; expiresAtMs: number }[];
}

export interface FleetAnswer {
  members: FleetMemberRow[];
  nowMs: number;
}

// ---- GET /api/flow-control (flow-control.ts) --------------------------------------------------

/**
 * The queues with waiting or active executions and the rate limiters, as the dashboard's runtime
 * knows their limits (runtime/verbs-flow-control.ts FV1..FV5); positions are 1-based.
 */
export interface FlowControlAnswer {
  queues: QueueRow[];
  limiters: LimiterRow[];
  nowMs: number;
}
