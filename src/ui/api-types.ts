/**
 * The dashboard's JSON API as types: what each endpoint answers and takes. The server's modules
 * build these, and the browser client (src/ui/client/) imports them with `import type`, so the
 * two are checked against each other by one `tsc` run. Types only: nothing here runs.
 *
 * Every endpoint answers an error as `{ error: { code, message } }` with its HTTP status
 * (http.ts H1); the client shows the message.
 */
import type { ErrorData } from "../kernel/errors.ts";
import type { ExecutionStatus } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import type { Budget, ResourceSnapshot } from "../kernel/resources.ts";
import type { ExecutionSummary } from "../store/spi.ts";

export type { ExecutionDetail, Projection, DetailSummary } from "./detail.ts";
export type { StepAttempt, StepDetail } from "../analytics/step-detail.ts";
export type { Conversation } from "../analytics/conversation.ts";
export type { ExecutionStatus, Json, ErrorData, Budget, ResourceSnapshot };

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
}

export interface ListAnswer {
  executions: ListRow[];
  /** The cursor of the next page (opaque: pass it back as `after`), or null on the last page. */
  next: string | null;
  nowMs: number;
}

// ---- GET /api/executions/:id (detail.ts) ------------------------------------------------------
// ExecutionDetail (detail.ts) carries `lineage: Lineage` (lineage.ts) and `actions:
// ApplicableActions` besides the projection, events, timeline, chain and children.

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

/** What a fork or a rerun made: the new execution, its clock and its budget. */
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
