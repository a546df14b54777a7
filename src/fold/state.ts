/**
 * Folded state: what a log means. Plain JSON, so a snapshot is `JSON.stringify({ seq, state })`.
 */
import type { CallKind, ExecutionStatus, StepNote } from "../kernel/events.ts";
import type { ErrorData } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { Budget, ResourceSnapshot } from "../kernel/resources.ts";
import type { ChainIdentity, InboxState } from "../kernel/chain.ts";
import type { ChildRecord, ParentLink } from "../kernel/children.ts";
import type { QueueMark } from "../kernel/queue.ts";

export type FrameStatus =
  | "started"
  | "completed"
  | "failed"
  | "cancelled"
  | "waiting"
  | "fired"
  | "resumed"
  | "received"
  | "timedOut"
  | "settled";

/** One recorded syscall of the flow body (a step, a sleep, a suspend or a receive). */
export interface Frame {
  kind: CallKind;
  name: string;
  scope: string;
  status: FrameStatus;
  /**
   * When its first attempt started. Absent only from the frame `callFrame` makes of a call kept
   * by its value alone (schema 1.13.0, fold/settled.ts L4): the log holds its start.
   */
  firstStartedAt?: number;
  attempts: number;
  input?: Json;
  output?: Json;
  /** A failed step's error; on a step still started, its last failed attempt's (retry). */
  error?: ErrorData;
  wakeAtMs?: number;
  /** A receive's inbox topic. */
  topic?: string;
  /** A step between attempts: when its next attempt is due (its last failure's time + backoff). */
  retryAtMs?: number;
  /** A running step's current attempt, when it is not the first: when that attempt started. */
  attemptStartedAt?: number;
  /** A spawn's child, or the child an awaitChild waits for. */
  childId?: string;
  /**
   * What the step's current attempt may spend at most, held against the budgets in force when it
   * started (schema 1.9.0): set by its STEP_STARTED, cleared when the attempt settles or is
   * charged as crashed (fold/steps.ts S3).
   */
  reserved?: Reserved;
  /**
   * What the running step's attempts noted mid-call (STEP_NOTED, schema 1.10.0), in order; dropped
   * when the step settles (fold/steps.ts S4).
   */
  notes?: StepNote[];
}

/** The kinds a call of which may be kept by its value alone (fold/settled.ts L1). */
export type LeanKind = "step" | "suspend" | "receive";

/** Call id -> value of each plainly settled call, by kind (fold/settled.ts L1). */
export type SettledCalls = { [K in LeanKind]?: Record<string, Json> };

/** An attempt's reservation, as its STEP_STARTED records it: the most it may spend, and where. */
export interface Reserved {
  delta: ResourceSnapshot;
  /** The nested budgets (ctx.nestedBudget) it counts against besides the execution's. */
  budgets?: string[];
}

export interface ExecutionState {
  executionId: string;
  /** The last sequence number folded; -1 for an empty log. */
  seq: number;
  status: ExecutionStatus;
  flow: string;
  flowVersion: string;
  fingerprint: string;
  input?: Json;
  startedAt: number;
  updatedAt: number;
  output?: Json;
  error?: ErrorData;
  /** Call id -> frame, for steps, sleeps and suspends. */
  frames: Record<string, Frame>;
  /** Scope -> `kind:callId` in the order the body made the calls; the non-determinism check reads it. */
  order: Record<string, string[]>;
  /** Steps started and not yet settled. */
  inFlight: number;
  /** Waits (sleeps, suspends) not yet settled: with nothing in flight, the execution is parked. */
  openWaits: number;
  /**
   * Call id -> value of each call that settled plainly, by kind (schema 1.13.0, fold/settled.ts
   * L1): such a call has no frame. Present from the start of an execution that keeps calls so
   * (a start recording schema 1.13.0 or later), absent from any earlier one; read a call through
   * `callFrame`, which sees both.
   */
  _settled?: SettledCalls;
  /** Call id -> recorded value of `ctx.decide` and `ctx.now`. */
  _decisions: Record<string, Json>;
  /** Resume payloads that arrived while no suspend was waiting, oldest first. */
  _resumePayloads: Json[];
  /** Suspends waiting for a resume, oldest first. */
  _openSuspends: string[];
  /**
   * The execution's deadline from EXECUTION_STARTED (schema 1.4.0): it ends `deadlineMs` after
   * `startedAt`, on the runtime clock. Absent when it has none.
   */
  deadlineMs?: number;
  /** The execution's budget, from EXECUTION_STARTED (absent when it has none). */
  _budget?: Budget;
  /** What the execution spent (absent until an effect is metered: G2). */
  _resources?: ResourceSnapshot;
  /** What each named nested budget's scope spent. */
  _scopeResources?: Record<string, ResourceSnapshot>;
  /** The last QUOTA_EXCEEDED: which dimension ran out, and in which budget. */
  _quotaExceeded?: { dimension: string; budget: string };
  /**
   * The chain this execution is a generation of (schema 1.5.0), from its EXECUTION_STARTED.
   * Absent for a generation 0: its chain id is its own id (see chainOf).
   */
  _chain?: ChainIdentity;
  /** The successor an EXECUTION_CONTINUED named (status `continued`). */
  _continuedTo?: string;
  /** Where the execution is in its chain's inbox (absent until it consumes a message). */
  _inbox?: InboxState;
  /** Who owns the execution (ADR 0111): recorded at its start, inherited along its chain. */
  _principal?: string;
  /**
   * The data subject whose data the execution holds (schema 1.8.0): its payloads are sealed with
   * the subject's key (trust/), which `eraseSubject` destroys. Inherited by successors, children
   * and forks.
   */
  _subject?: string;
  /**
   * The queue it was recorded in (schema 1.12.0, fold/queue.ts): while `queued` it waits there;
   * once admitted, when (`admittedAt`) and how long it waited.
   */
  _queue?: QueueMark & { admittedAt?: number; waitedMs?: number };
  /** A fork's origin and fork point (fold/fork-point.ts F12). */
  _forkedFrom?: { executionId: string; seq: number };
  /** The subjects erased from this log (SUBJECT_ERASED, schema 1.8.0), in order. */
  _erased?: string[];
  /** The execution that spawned this one (schema 1.7.0), inherited along its chain. */
  _parent?: ParentLink;
  /** The children this execution spawned, by id, and how each ended once it has. */
  _children?: Record<string, ChildRecord>;
}

/** The chain an execution belongs to: its recorded one, or a chain of its own (generation 0). */
export function chainOf(state: ExecutionState): ChainIdentity {
  return state._chain ?? { chainId: state.executionId, generation: 0 };
}

export interface Snapshot {
  seq: number;
  state: ExecutionState;
}

export function initialState(executionId: string): ExecutionState {
  return {
    executionId,
    seq: -1,
    status: "pending",
    flow: "",
    flowVersion: "",
    fingerprint: "",
    startedAt: 0,
    updatedAt: 0,
    frames: {},
    order: {},
    inFlight: 0,
    openWaits: 0,
    _decisions: {},
    _resumePayloads: [],
    _openSuspends: [],
  };
}
