/**
 * The runtime: registers flows, starts and resumes executions, owns them under leases, fires their
 * timers and recovers abandoned ones.
 *
 * Invariants (tests cite W1..W6):
 * W1. An execution is driven by at most one Run at a time, under a lease whose fence every
 *     append carries; a runtime drives an execution only while it holds the lease.
 * W2. A parked run releases its lease and stays cached; before it is driven again its lease is
 *     re-acquired and the log's tail checked: anything but external input (RESUMED, TIMER_FIRED)
 *     appended meanwhile means another owner drove it, and the cached body is dropped.
 * W3. Outside operations on one execution (start, resume, a fired timer, recovery) run one at a
 *     time in this runtime.
 * W4. Every refusal (unknown flow, bad id, bad input, too large) is raised before any append.
 * W5. A caller-chosen id is an idempotent start: the same flow and input return the existing
 *     execution; anything else is ExecutionConflictError.
 * W6. recoverAbandoned re-drives every pending or running execution whose owner is gone (its
 *     lease released, expired, or held by a dead process on this host); it is the only repair.
 * W7. One owner (issue 24): a runtime's state is declared once, in RuntimeState (runtime-state.ts);
 *     the modules that act on it hold functions and constants only.
 * W8. No room imports one above it: runtime-state.ts, runtime-routing.ts, runtime-core.ts,
 *     runtime-wiring.ts, the verbs, this face. What a lower room calls upward (a run's context
 *     deps, a fired timer, background duties) this module hands the state as a RuntimeWiring.
 * W9, W10 (routing's memory of heads, a chain's cancel) are stated in runtime-routing.ts.
 *
 * The Runtime class below is the face: each public method hands the state to the verb that does
 * the work, in the module of what it acts on: verbs-executions.ts (one execution), verbs-list.ts
 * (many), verbs-chains.ts (a chain, a fork, a restore), verbs-fleet.ts (schedules, recovery, the
 * background duties), members.ts (the fleet's members), verbs-flow-control.ts (what waits in
 * queues and limiters) and verbs-trust.ts (what a log proves and keeps). Its getters and the callbacks a run makes are runtime-base.ts's RuntimeFace, which it
 * extends.
 */
import type { Envelope } from "../kernel/events.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { ExecutionSummary, ForkLink } from "../store/spi.ts";
import type { LiveDelta } from "../effects/deltas.ts";
import type { VerifyReport } from "../trust/verify.ts";
import { optionsOf, type Flow } from "./flow.ts";
import type { Outcome } from "./outcome.ts";
import type { Compaction, CompactOptions } from "./compaction.ts";
import type { RetentionPolicy } from "./retention.ts";
import type { RestoreOptions, ResumeAsOptions } from "./restore.ts";
import type { SendOptions } from "./inbox.ts";
import type { OwnedSchedule, ScheduleOptions } from "./schedules.ts";
import type { Erasure } from "./erase-subject.ts";
import type {
  CallerOptions,
  ExecutionHandle,
  ForkOptions,
  RuntimeOptions,
  StartOptions,
} from "./runtime-options.ts";
import { RuntimeState, type RuntimeWiring } from "./runtime-state.ts";
import { RuntimeFace } from "./runtime-base.ts";
import type { FleetAnswer } from "./fleet-answer.ts";
import * as members from "./members.ts";
import { contextDeps } from "./runtime-wiring.ts";
import * as executions from "./verbs-executions.ts";
import { list, type ListOptions } from "./verbs-list.ts";
import * as chains from "./verbs-chains.ts";
import * as fleet from "./verbs-fleet.ts";
import * as trust from "./verbs-trust.ts";
import * as queues from "./queues.ts";
import * as flowControl from "./verbs-flow-control.ts";
import type { LimiterRow, QueueRow, QueuesOptions, WaitReason } from "./verbs-flow-control.ts";
import * as starts from "./verbs-start.ts";

export type {
  CallerOptions,
  ExecutionHandle,
  ForkOptions,
  RuntimeOptions,
  StartOptions,
} from "./runtime-options.ts";

/** What the state calls in the rooms above it (W8). */
const WIRING: RuntimeWiring = {
  contextDeps,
  fireTimer: fleet.fireTimer,
  duties: [
    members.heartbeat,
    fleet.fireDueTimers,
    fleet.fireSchedules,
    queues.admitQueued,
    fleet.recoverAbandoned,
  ],
};

export function createRuntime(options: RuntimeOptions): Runtime {
  return new Runtime(options);
}

export class Runtime extends RuntimeFace {
  constructor(options: RuntimeOptions) {
    super(new RuntimeState(options, WIRING));
  }
  /** The flows registered here by name, and whether the background loop runs (the dashboard). */
  get registered(): { flows: ReadonlyMap<string, Flow>; background: boolean } {
    return { flows: this.state.flows, background: this.state.loop !== undefined };
  }

  // ---- executions (verbs-executions.ts) ------------------------------------------------------

  registerFlow(flow: Flow): this {
    executions.registerFlow(this.state, flow);
    return this;
  }

  /**
   * Starts `flow` with `input` (typed by the flow: a wrong input does not compile, and
   * `result()` resolves to the flow's output type). A flow's input schema is checked first,
   * before anything is recorded (InvalidInputError listing the issues). Starting by name is
   * typed `unknown`.
   */
  start<I, O, In>(
    flow: Flow<I, O, In>,
    ...args: undefined extends In
      ? [input?: NoInfer<In>, options?: StartOptions]
      : [input: NoInfer<In>, options?: StartOptions]
  ): Promise<ExecutionHandle<O>>;
  start(flow: string, input?: unknown, options?: StartOptions): Promise<ExecutionHandle>;
  async start(
    flow: string | Flow,
    input?: unknown,
    options?: StartOptions,
  ): Promise<ExecutionHandle> {
    return starts.start(this.state, flow, input, optionsOf(options, "start"));
  }

  /** A handle on `id`, acting as `caller` (the principal the execution was started with). */
  handle(id: string, caller: CallerOptions = {}): ExecutionHandle {
    return executions.handle(this.state, id, caller);
  }

  /**
   * The text deltas of the execution's running LLM steps as they stream on this runtime, from
   * now until it ends (not journaled: the log holds each step's result). An owned execution's
   * need `{ as }` naming its owner, else the first `next()` rejects with UnauthorizedError and
   * nothing is handed out; another runtime's are never seen here (effects/deltas.ts D1, D2).
   */
  deltas(id: string, options: CallerOptions = {}): AsyncIterableIterator<LiveDelta> {
    return executions.deltas(this.state, id, optionsOf(options, "deltas"));
  }

  /**
   * Cancels an execution from any process that shares the store (K8.2): fences its lease, writes
   * STEP_CANCELLED for its running steps and EXECUTION_CANCELLED, and makes its owner abort what
   * is in flight. True when this call ended it; false when it had already ended.
   */
  async cancel(id: string, reason?: string, options: CallerOptions = {}): Promise<boolean> {
    return executions.cancel(this.state, id, reason, optionsOf(options, "cancel"));
  }

  async resume(id: string, payload?: unknown, options: CallerOptions = {}): Promise<void> {
    return executions.resume(this.state, id, payload, optionsOf(options, "resume"));
  }

  async waitForCompletion(
    id: string,
    options: { timeoutMs?: number } & CallerOptions = {},
  ): Promise<Outcome> {
    return executions.waitForCompletion(this.state, id, optionsOf(options, "waitForCompletion"));
  }

  async getState(id: string, options: CallerOptions = {}): Promise<ExecutionState> {
    return executions.getState(this.state, id, optionsOf(options, "getState"));
  }

  /**
   * The state of an execution this runtime drives, as far as it is committed: what its run holds
   * in memory, without a store read. Undefined when this runtime drives no such execution (or it
   * has appends in flight). For tools that compare memory with the log (the simulator). An
   * owned execution's needs `{ as }` naming its owner.
   */
  heldState(id: string, options: CallerOptions = {}): ExecutionState | undefined {
    return executions.heldState(this.state, id, optionsOf(options, "heldState"));
  }

  async readLog(id: string, options: CallerOptions = {}): Promise<Envelope[]> {
    return executions.readLog(this.state, id, optionsOf(options, "readLog"));
  }

  /** The executions `query` names: with `{ as }`, only that principal's (verbs-list.ts LS1). */
  list(query?: ListOptions): Promise<ExecutionSummary[]> {
    return list(this.state, query);
  }

  // ---- chains, forks and restores (verbs-chains.ts) ------------------------------------------

  /**
   * Appends `message` to the inbox of the chain `idOrChainId` belongs to (any of its
   * generations' ids), for `ctx.receive`, and wakes the chain's live generation if it waits.
   * Each message is delivered once; a retry with the same `key` is dropped (within the last
   * 1,024 consumed). Returns the chain and the message's place in its stream.
   */
  async send(
    idOrChainId: string,
    message: unknown,
    options: SendOptions = {},
  ): Promise<{ chainId: string; seq: number }> {
    return chains.send(this.state, idOrChainId, message, optionsOf(options, "send"));
  }

  /**
   * The id of the newest verified generation of the chain `id` belongs to (ADR 0109: routed,
   * O(log n) point reads): `id` itself for an execution that never continued.
   */
  async followToHead(id: string, options: CallerOptions = {}): Promise<string> {
    return chains.followToHead(this.state, id, optionsOf(options, "followToHead"));
  }

  /**
   * A new execution (`newId`, or a fresh id) whose log is a copy of `id`'s events up to and
   * including `atSequence`, run on from there by this runtime when it has the flow (see
   * fork.ts). A fork of a chain member is a chain of its own (ADR 0109 D7). It starts from what
   * the copy spent; `{ budget }` gives it a budget of its own, no larger than its origin's (V6).
   *
   * @example
   * // Retry from sequence 12 with at most 1,000 tokens in all, the prefix's spend included.
   * await runtime.fork("run-1", 12, "run-1-retry", { budget: { tokens: 1000 } });
   */
  async fork(
    id: string,
    atSequence: number,
    newId?: string,
    options: ForkOptions = {},
  ): Promise<ExecutionHandle> {
    return chains.fork(this.state, id, atSequence, newId, optionsOf(options, "fork"));
  }

  /**
   * The forks made of `id`, oldest first, each with its fork point (at most `options.limit`, 100
   * by default). An owned execution's need `{ as }` naming its owner, as `getState` does.
   */
  forksOf(id: string, options: CallerOptions & { limit?: number } = {}): Promise<ForkLink[]> {
    return chains.forksOf(this.state, id, optionsOf(options, "forksOf"));
  }

  /**
   * Drives `id` on from `state`, a folded state as `getState` gives it (moved from another store,
   * repaired by hand): its frames, call order, decisions, queued resume payloads and input replace
   * the execution's, as a STATE_RESTORED fact in its log, and `flow` drives it from then on. What
   * it has spent, its owner, its chain and its deadline stay the log's (fold/restored.ts R2). An
   * id with no log is created (restore.ts R3..R5).
   */
  async restoreFromState(
    id: string,
    flow: string | Flow,
    state: unknown,
    options: RestoreOptions = {},
  ): Promise<ExecutionHandle> {
    return chains.restoreFromState(
      this.state,
      id,
      flow,
      state,
      optionsOf(options, "restoreFromState"),
    );
  }

  /**
   * Resumes `id` (routed to its chain's head, as `resume`) under `flow`, a new version of its
   * flow or another one, with its state mapped by `options.transformState` when given: the
   * restore and the resume are one batch (restore.ts R6).
   */
  async resumeAs(
    id: string,
    flow: string | Flow,
    payload?: unknown,
    options: ResumeAsOptions = {},
  ): Promise<void> {
    return chains.resumeAs(this.state, id, flow, payload, optionsOf(options, "resumeAs"));
  }

  // ---- the fleet: schedules, recovery (verbs-fleet.ts) ----------------------------------------

  /**
   * Starts one execution of `flow` per occurrence of `options.cron` on the runtime clock, from
   * now on, with the id `<name>@<ISO time>` (see schedules.ts). Stored, so every runtime that
   * has the flow fires it, and a schedule put again keeps its progress. Idempotent. Put with
   * `{ principal }`, it is that principal's (schedules.ts SC2): only it can put it again or
   * remove it, and its occurrences start owned by it.
   */
  schedule(flow: string | Flow, options: ScheduleOptions): Promise<OwnedSchedule> {
    return fleet.schedule(this.state, flow, options);
  }

  /**
   * Removes a schedule; executions it started are not touched. An owned schedule needs
   * `{ as }` naming its owner (UnauthorizedError otherwise, and it stays).
   */
  unschedule(name: string, options: CallerOptions = {}): Promise<void> {
    return fleet.unschedule(this.state, name, optionsOf(options, "unschedule"));
  }

  /**
   * Pauses a schedule: it starts no occurrence until resumed, and a `schedule()` put again keeps
   * the pause (schedules.ts SC4). An owned schedule needs `{ as }` naming its owner.
   */
  pauseSchedule(name: string, options: CallerOptions = {}): Promise<OwnedSchedule> {
    return fleet.setPaused(this.state, name, true, optionsOf(options, "pauseSchedule"));
  }

  /** Resumes a schedule from now: the occurrences missed while it was paused never start (SC4). */
  resumeSchedule(name: string, options: CallerOptions = {}): Promise<OwnedSchedule> {
    return fleet.setPaused(this.state, name, false, optionsOf(options, "resumeSchedule"));
  }

  /**
   * The fleet's live members (every runtime sharing this store that runs its background loop),
   * each with its flows, last heartbeat and the leases it holds now (members.ts M1..M4).
   */
  fleet(): Promise<FleetAnswer> {
    return members.fleet(this.state);
  }

  /** The stored schedules: with `{ as }`, only that principal's (SC2); without it, every one. */
  schedules(options: CallerOptions = {}): Promise<OwnedSchedule[]> {
    return fleet.schedules(this.state, optionsOf(options, "schedules"));
  }

  /**
   * Starts every due occurrence of the schedules whose flow this runtime has (the background loop
   * calls it every poll); returns the ids it started or adopted.
   */
  fireSchedules(): Promise<string[]> {
    return fleet.fireSchedules(this.state);
  }

  /** Re-drives every pending or running execution whose owner is gone (W6). */
  recoverAbandoned(): Promise<string[]> {
    return fleet.recoverAbandoned(this.state);
  }

  // ---- flow control: what waits, and why (verbs-flow-control.ts) ------------------------------

  /** Each queue with waiting or active executions: limits, slots held, waiters in order (FV1). */
  queues(options?: QueuesOptions): Promise<QueueRow[]> {
    return flowControl.queues(this.state, options);
  }

  /** Each rate limiter: its window's charges, calls in flight, block, waiters in order (FV3). */
  limiters(): Promise<LimiterRow[]> {
    return flowControl.limiters(this.state);
  }

  /** Each waiting execution's queue or limiter, position and expected wait (FV4). */
  waits(options?: QueuesOptions): Promise<Map<string, WaitReason>> {
    return flowControl.waits(this.state, options);
  }

  // ---- trust: what a log proves and keeps (verbs-trust.ts) -----------------------------------

  /**
   * Checks the audit chain of `id` as stored (trust/verify.ts K1..K5): every hash, every link,
   * density, and a successor's link to its predecessor. `ok: false` names the first bad sequence
   * number. Needs a log written with `audit` on (and the same key, for a keyed audit).
   */
  async verifyLog(id: string, options: CallerOptions = {}): Promise<VerifyReport> {
    return trust.verifyLog(this.state, id, optionsOf(options, "verifyLog"));
  }

  /**
   * Makes every payload of data subject `subject` unrecoverable (docs/trust.md): cancels its live
   * executions, records SUBJECT_ERASED in each of its logs, then destroys its key
   * (erase-subject.ts X1..X4). Logs keep their shape, still fold, and still verify. With `{ as }`,
   * only when each execution holding the subject's data is that principal's or has no owner,
   * else UnauthorizedError and nothing done (docs/trust.md); without, every one (the operator's).
   */
  eraseSubject(subject: string, options: CallerOptions = {}): Promise<Erasure> {
    return trust.eraseSubject(this.state, subject, optionsOf(options, "eraseSubject"));
  }

  /**
   * Deletes the events of `id` that its latest snapshot covers, except the pinned kinds
   * (EXECUTION_STARTED, the terminal kinds, QUOTA_EXCEEDED, STATE_RESTORED) and `options.keepKinds`; see
   * compaction.ts. Sequence numbers stay: `readLog` returns a log with a gap.
   */
  async compact(id: string, options: CompactOptions = {}): Promise<Compaction> {
    return trust.compact(this.state, id, optionsOf(options, "compact"));
  }

  /**
   * Deletes the terminal executions `policy` names (`continued` included by default), except
   * the generations chain routing still needs; returns the ids released. See retention.ts.
   */
  applyRetention(policy: RetentionPolicy): Promise<string[]> {
    return trust.applyRetention(this.state, policy);
  }

  // ---- the runtime itself (runtime-state.ts) -------------------------------------------------
  close(): Promise<void> {
    return this.state.close();
  }
  report(e: unknown): void {
    this.state.report(e);
  }
}
