/**
 * The log: envelopes and event kinds.
 *
 * Invariants (cited by tests as E1..E4):
 * E1. Sequence numbers are dense per execution as appended, from 0. A compaction may later
 *     delete events a snapshot covers (store S14): the log then has a gap, and no number moves.
 * E2. Sequence 0 is always EXECUTION_STARTED.
 * E3. Terminal kinds take effect only from a kernel-stamped envelope (`meta.kernel: true`);
 *     an app event that borrows the name is inert.
 * E4. Nothing follows a terminal event in a log but SUBJECT_ERASED facts (an erasure of a data
 *     subject, runtime/erase-subject.ts, is recorded in the logs it made unreadable, ended or not).
 * E5. Every `ExecutionStatus` is handled wherever Loom branches on one: a `StatusTable` (an entry
 *     per status) or a switch ending in `assertNever` (never.ts), so a status added to the union
 *     and handled nowhere does not compile. The consumers: this module's table, the fold's F7
 *     (fold.ts), `outcomeOf` (runtime/outcome.ts), the CLI's exit codes (cli/await-outcome.ts).
 */
import type { Json } from "./json.ts";

/**
 * Bumped whenever what the fold does with an existing kind changes.
 * 1.1.0: a STEP_COMPLETED or STEP_FAILED with no STEP_STARTED before it carries the step's start;
 *        a step's `startedAt`, when recorded, is its first start time.
 * 1.2.0: RESOURCE_METERED folds into `_resources` (and named budgets' `_scopeResources`),
 *        QUOTA_EXCEEDED into `_quotaExceeded`, EXECUTION_STARTED's `budget` into `_budget`.
 * 1.3.0: a STEP_FAILED with `retrying: true` is a failed attempt, not the step's end: the step
 *        stays started, its frame's `error` is the attempt's until it completes, and its
 *        `retryAtMs` (the failure's time + `retryInMs`) holds until the next STEP_STARTED. The
 *        first one may open the frame, carrying the start as a settling event does.
 * 1.4.0: EXECUTION_STARTED's `deadlineMs` folds into `deadlineMs` (the execution's deadline,
 *        anchored to its `startedAt`); a STEP_STARTED of a running step's later attempt sets
 *        its frame's `attemptStartedAt` (until the step settles or the attempt fails).
 * 1.5.0: chains (ADR 0109) and the chain inbox (ADR 0110). EXECUTION_STARTED's `chainId`,
 *        `generation` and `continuedFrom` fold into `_chain`, its carried resources, quota,
 *        budget and inbox seed the successor's state, and its carried `chainDeadline` caps
 *        `deadlineMs`; its `principal` folds into `_principal`. A kernel EXECUTION_CONTINUED's
 *        `successorId` folds into `_continuedTo`. MESSAGE_CONSUMED advances `_inbox` and settles
 *        a receive; a SUSPENDED named "receive" is a receive's wait.
 * 1.6.0: STATE_RESTORED (kernel-stamped, from restoreFromState and resumeAs) replaces the flow
 *        body's replay record (frames, call order, decisions, queued resume payloads, input) and,
 *        when it names one, the flow; everything else stays (fold/restored.ts R1, R2).
 * 1.7.0: children (ADR 0109 D5, D6). EXECUTION_STARTED's `parent` folds into `_parent` (a
 *        successor carries it) and its `deadlineAtMs` caps `deadlineMs`; CHILD_STARTED records a spawn (a `spawn` frame and `_children`),
 *        CHILD_DONE settles a child's slot once (adding what its chain spent to `_resources`),
 *        and a SUSPENDED named "awaitChild" is a wait on a child (fold/children.ts).
 * 1.8.0: trust. EXECUTION_STARTED's `subject` folds into `_subject`; a kernel SUBJECT_ERASED folds
 *        its `subject` into `_erased`, also after a terminal event (E4, fold F4), and changes
 *        nothing else.
 * 1.9.0: spend (issue 20). A STEP_STARTED's `reserved` (`{ delta, budgets? }`) is what its attempt
 *        may spend at most under the budgets in force; the step's frame holds it until the attempt
 *        settles, or until a RESOURCE_METERED marked `estimated: "crashed-attempt"` charges it
 *        (fold/steps.ts S3, fold/metering.ts). EXECUTION_STARTED's `parent.granted` marks a child
 *        whose budget is a grant from its parent's (kept in `_parent`). A fork's copied event at
 *        its fork point may carry `meta.forkBudget`, which narrows `_budget` there, never raising
 *        or dropping a limit (fold F11, runtime/fork.ts V6); its `forkedFrom` folds into
 *        `_forkedFrom` and its `meta.forkedAt` is the fork's clock base: `startedAt` and the
 *        `firstStartedAt` of the steps the prefix left running move to it (fold F12, fork.ts V7). RESOURCE_METERED's `delta.costUnknown`
 *        folds into `_resources.costUnknown` (and a named budget's `_scopeResources`), which
 *        stays set (kernel/resources.ts Q7); `delta.priced` is recorded, not folded.
 * 1.10.0: STEP_NOTED (issue 21 item 8): a fact an attempt of a running step recorded about the
 *        outside world mid-call (a remote task's id), `{ callId, attempt, note }`. The step's frame keeps
 *        its notes, in order, while the step runs (a failed attempt's too, for the next one to
 *        read), and drops them when the step settles (fold/steps.ts S4); a fork point drops those
 *        of the steps its prefix left running (fold/fork-point.ts F13).
 * 1.11.0: leaner step events (issue 23 item 3). A step's start (a STEP_STARTED, or a settling
 *        event that carries it) leaves out its `scope` and `name` when its call id gives them
 *        (`<scope><name>#<n>`), and the fold reads them from the id (fold/steps.ts S5); its
 *        `startedAt` is left out when it equals the event's `at`, which the fold already read as
 *        the start (1.1.0).
 * 1.12.0: flow control (issue 26). EXECUTION_STARTED's `queue` (`{ name, key?, priority,
 *        dedupe?, notBeforeMs? }`) folds into `_queue` and the status `queued`: the execution
 *        waits in that queue, and its body runs only after an EXECUTION_ADMITTED (`{ queue,
 *        waitedMs }`), which the runtime appends under the lease the queue's admission gave it
 *        (store S26). START_DEBOUNCED (`{ input, notBeforeMs }`), appended only while queued,
 *        replaces the input and the time before which it is not admitted (a debounced start:
 *        the last input wins); the status stays `queued`.
 * 1.13.0: lean generations (issue 28). In an execution whose EXECUTION_STARTED records
 *        `schemaVersion` 1.13.0 or later, a call that settles plainly (a step completed at its
 *        first attempt with an output and no input, a suspend resumed, a receive answered, each
 *        with the scope and name its id gives) keeps only its value, in `_settled[kind][callId]`,
 *        and no frame (fold/settled.ts L1..L5); a STATE_RESTORED's `state._settled` is part of
 *        the replay record it restores. An earlier start folds every call to a frame, as before.
 */
export const EVENT_SCHEMA_VERSION = "1.13.0";

export const EVENT_KINDS = [
  "EXECUTION_STARTED",
  "STEP_STARTED",
  "STEP_COMPLETED",
  "STEP_FAILED",
  "STEP_CANCELLED",
  "STEP_NOTED",
  "DECISION_RECORDED",
  "TIMER_SCHEDULED",
  "TIMER_FIRED",
  "SUSPENDED",
  "RESUMED",
  "MESSAGE_CONSUMED",
  "RESOURCE_METERED",
  "QUOTA_EXCEEDED",
  "CHILD_STARTED",
  "CHILD_DONE",
  "EXECUTION_COMPLETED",
  "EXECUTION_FAILED",
  "EXECUTION_CANCELLED",
  "EXECUTION_CONTINUED",
  "STATE_RESTORED",
  "SUBJECT_ERASED",
  "EXECUTION_ADMITTED",
  "START_DEBOUNCED",
] as const;

export type EventKind = (typeof EVENT_KINDS)[number];

export const TERMINAL_KINDS: ReadonlySet<string> = new Set<EventKind>([
  "EXECUTION_COMPLETED",
  "EXECUTION_FAILED",
  "EXECUTION_CANCELLED",
  "EXECUTION_CONTINUED",
]);

export interface EnvelopeMeta {
  kernel?: true;
  fence?: number;
  [key: string]: Json | undefined;
}

export interface Envelope {
  executionId: string;
  seq: number;
  kind: EventKind;
  /** Runtime clock, epoch ms. */
  at: number;
  payload: Json;
  meta?: EnvelopeMeta;
}

/**
 * `queued`: recorded with a queue (schema 1.12.0) and not yet admitted by it; it holds no slot
 * and its body has not run. `pending`: started, no call made yet.
 */
export type ExecutionStatus = "queued" | "pending" | "running" | "parked" | TerminalStatus;

/** The statuses an execution ends in: nothing folds after one (E4); `handle.result()` gives one. */
export type TerminalStatus = "completed" | "failed" | "cancelled" | "continued";

/**
 * A value for every status (E5): a status added to `ExecutionStatus` without an entry in each
 * table of this type does not compile.
 */
export type StatusTable<T> = { readonly [S in ExecutionStatus]: T };

/** Whether each status is terminal (E5); its key order is EXECUTION_STATUSES'. */
const IS_TERMINAL: StatusTable<boolean> = {
  queued: false,
  pending: false,
  running: false,
  parked: false,
  completed: true,
  failed: true,
  cancelled: true,
  continued: true,
};

export const EXECUTION_STATUSES: readonly ExecutionStatus[] = Object.keys(
  IS_TERMINAL,
) as ExecutionStatus[];

export const TERMINAL_STATUSES: ReadonlySet<ExecutionStatus> = new Set<ExecutionStatus>(
  EXECUTION_STATUSES.filter((s) => IS_TERMINAL[s]),
);

export function isTerminalStatus(status: ExecutionStatus): boolean {
  return TERMINAL_STATUSES.has(status);
}

/** A terminal event that counts: a terminal kind on a kernel-stamped envelope (E3). */
export function isTerminalEvent(e: Pick<Envelope, "kind" | "meta">): boolean {
  return TERMINAL_KINDS.has(e.kind) && e.meta?.kernel === true;
}

export function isEventKind(value: unknown): value is EventKind {
  return typeof value === "string" && (EVENT_KINDS as readonly string[]).includes(value);
}

/**
 * A fact one attempt of a step recorded mid-call (STEP_NOTED, schema 1.10.0): what a later
 * attempt needs to know about what this one set going outside (a remote task's id).
 */
export interface StepNote {
  attempt: number;
  note: { [key: string]: Json };
}

/** The syscall kinds a flow body records; the non-determinism check compares them. */
export type CallKind = "step" | "decision" | "sleep" | "suspend" | "receive" | "spawn" | "child";

/** Payload shapes the runtime writes. The fold reads them defensively. */
export interface StartedPayload {
  flow: string;
  flowVersion: string;
  fingerprint: string;
  input?: Json;
  schemaVersion: string;
}

export interface CallPayload {
  /** The deterministic syscall id, scope included (`p0.1/search#0`). */
  callId: string;
  /** The scope the call was made in ("" at the root); a step's may be left out (1.11.0). */
  scope?: string;
  /** The call's name; a step's may be left out (1.11.0). */
  name?: string;
}
