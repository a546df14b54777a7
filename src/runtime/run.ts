/**
 * A Run drives one execution's flow body in this process: it starts the body and records its
 * outcome, acts on each commit, parks the run when only the outside world can move it, stops it,
 * ends it on its terminal event, and cancels it past its deadline. The rest of the runtime calls
 * its members; where the work is one of its parts', the member delegates to it: the appends
 * (run-appends.ts: folding, batches, snapshots and deferred starts, onto the journal), the scopes
 * (run-scopes.ts: claims, call ids, begin/end and waits), the step attempts (run-attempts.ts),
 * the drive (run-drive.ts: span, lease heartbeat, deadline timer) and the park-time inbox re-read
 * (run-inbox.ts).
 *
 * Invariants (tests cite R1..R9). R2, R3 and R7 are kept in run-scopes.ts, R4, R5 and R9 in
 * run-appends.ts, whose heads state them whole; R1, R6 and R8 here, with their parts there:
 * R1. Every event is folded into `state` when it is queued. A wait (a resume's payload, a fired
 *     timer) wakes once its settling event is committed; a step's result, once queued when the
 *     body runs nothing else (handOver), and a new step's code runs only on committed facts.
 * R2. A call the log already answers is answered from the fold, never re-executed.
 * R3. A re-run that asks for a different call than the log recorded stops the run.
 * R4. Nothing is appended after a terminal event, and nothing after the run stopped.
 * R5. Every append carries the run's fence; a refused append stops the run.
 * R6. A run that stopped (fenced, evicted, closed, non-deterministic) never settles its body's
 *     outstanding calls: the body halts where it is, and no catch block of the flow runs for a
 *     reason that is not a fact in the log.
 * R7. Calls in one scope are sequential; concurrency goes through ctx.parallel.
 * R8. A run parks (releases its lease, joins the cache) only when the fold says `parked`, every
 *     append is committed, and every live scope of the body is blocked in a wait.
 * R9. A step's start is written at the next group commit if the step is still running, else
 *     inside its settling event (see deferStart).
 */
import type { CallKind, Envelope } from "../kernel/events.ts";
import { isTerminalStatus } from "../kernel/events.ts";
import {
  CancelledError,
  DeadlineExceededError,
  ExecutionEndedError,
  errorToData,
} from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { ResourceDelta } from "../kernel/resources.ts";
import { cancelSpecs, endSpecs } from "./cancel-specs.ts";
import { validated } from "../kernel/schema.ts";
import { fold } from "../fold/fold.ts";
import type { Flow } from "./flow.ts";
import type { FlowContext } from "./contract.ts";
import { inFlowScope } from "./flow-scope.ts";
import type { AppendBatch } from "../store/spi.ts";
import type { EventSpec } from "./journal.ts";
import { outcomeOf, type Outcome } from "./outcome.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { DriveSpan } from "./tracing.ts";
import { RunAppends, type AppendHost } from "./run-appends.ts";
import { RunAttempts } from "./run-attempts.ts";
import { RunDrive, type DriveHost } from "./run-drive.ts";
import { InboxReread, type InboxHost } from "./run-inbox.ts";
import { RunScopes, type Claim, type WaitTimers } from "./run-scopes.ts";
import { Reservations } from "./run-reservations.ts";

export type { EventSpec } from "./journal.ts";
export { merged } from "./run-appends.ts";
export { halted, type Claim } from "./run-scopes.ts";
export type RunPhase = "active" | "parked" | "done" | "stopped";

/** What a Run needs from its runtime; the runtime implements it (its parts ask for theirs). */
export interface RunHost extends AppendHost, DriveHost<Run>, WaitTimers, InboxHost {
  /** Validates a flow's return value against the output bound. */
  boundOutput(value: unknown, flowName: string): Json | undefined;
  /** The run's body waits on something only the outside world settles. */
  parked(run: Run): void;
  /** The run recorded a terminal event (whose batch released the lease). */
  ended(run: Run): void;
  /** The run stopped without an outcome (fenced, non-determinism, closing). */
  stopped(run: Run, error: Error): void;
}

export class Run {
  readonly id: string;
  state: ExecutionState;
  fence: number;
  committedSeq: number;
  phase: RunPhase = "active";
  stopError: Error | undefined;
  /** Its body called ctx.continueAsNew: it ends `continued` (ADR 0109); outside input waits. */
  rotating = false;
  /**
   * No other owner has held this execution's lease since this runtime last drove it: true for a
   * run made from a state read under its lease, and set again each time it is reactivated
   * (runtime-core.ts ownedRun).
   */
  untouched = true;
  /** Rough size of what the run holds in memory, for the cache's byte bound. */
  approxBytes = 0;
  readonly done: Promise<Outcome>;
  private settle!: { resolve: (o: Outcome) => void; reject: (e: Error) => void };
  private readonly scopes: RunScopes;
  private readonly appends: RunAppends;
  private readonly inbox: InboxReread;
  private readonly attempts: RunAttempts;
  private readonly drive: RunDrive<Run>;
  private parkWatchers: (() => void)[] = [];

  constructor(
    private readonly host: RunHost,
    readonly flow: Flow,
    state: ExecutionState,
    fence: number,
  ) {
    this.id = state.executionId;
    this.state = state;
    this.fence = fence;
    this.committedSeq = state.seq;
    this.done = new Promise<Outcome>((resolve, reject) => (this.settle = { resolve, reject }));
    this.done.catch(() => undefined);
    this.scopes = new RunScopes(this, host);
    this.appends = new RunAppends(this, host, this.scopes, (seq) => this.afterCommit(seq));
    this.inbox = new InboxReread(this, host);
    this.attempts = new RunAttempts(this);
    this.drive = new RunDrive(this, host, () => this.deadlineExceeded());
    this.provisionals = this.attempts.provisionals;
  }

  /** The span of this drive, while it records (tracing.ts): steps start theirs under it. */
  get trace(): DriveSpan | undefined {
    return this.drive.trace;
  }

  get active(): boolean {
    return this.phase === "active";
  }

  get live(): boolean {
    return this.phase === "active" || this.phase === "parked";
  }

  /** Runs the body from the top; the fold answers every call it already recorded. */
  startBody(ctx: FlowContext): void {
    // A body with calls in the log re-runs over them (T2: one span per drive).
    this.drive.start(this.state.order[""]?.length ? "replay" : "start");
    const body = this.flow.body as (ctx: unknown, input: unknown) => Promise<unknown>;
    void (async () => {
      let output: unknown;
      try {
        const input = this.state.input;
        const own = input !== null && typeof input === "object" ? structuredClone(input) : input;
        output = await inFlowScope({ ctx }, () => body(ctx, own)); // FS1 (flow-scope.ts)
      } catch (e) {
        await this.finishFailed(e);
        return;
      }
      await this.finishCompleted(output);
    })();
  }

  private async finishCompleted(output: unknown): Promise<void> {
    if (!this.live) return;
    let json: Json | undefined;
    try {
      const schema = this.flow.output;
      const checked =
        schema === undefined
          ? output
          : await validated(schema, output, `the output of flow "${this.flow.name}"`);
      json = this.host.boundOutput(checked, this.flow.name);
    } catch (e) {
      await this.finishFailed(e);
      return;
    }
    await this.finish({
      kind: "EXECUTION_COMPLETED",
      payload: json === undefined ? {} : { output: json },
      kernel: true,
    });
  }

  private async finishFailed(thrown: unknown): Promise<void> {
    if (!this.live) return;
    const error = errorToData(thrown) as unknown as Json;
    await this.finish({ kind: "EXECUTION_FAILED", payload: { error }, kernel: true });
  }

  /** Ends the run; reserving calls the body left running are charged first (C4, cancel-specs). */
  private async finish(end: EventSpec): Promise<void> {
    if (this.pastDeadline()) return; // K8.3: past its deadline, the cancel owns the outcome
    const specs = endSpecs(this.state, this.host.clock.now(), this, end);
    await this.enqueue(specs).catch(() => undefined);
  }

  // ---- scopes (run-scopes.ts) ------------------------------------------------------------------

  /** Marks `scope` as making call `what`; refuses a second outstanding call (R7). */
  begin(scope: string, what: string): void {
    this.scopes.begin(scope, what);
  }

  end(scope: string): void {
    this.scopes.end(scope);
  }

  /** A new branch scope of a ctx.parallel in `parent`. */
  branchScopes(parent: string, count: number): string[] {
    return this.scopes.branchScopes(parent, count);
  }

  branchDone(scope: string): void {
    this.scopes.branchDone(scope);
  }

  setBlocked(scope: string, blocked: boolean): void {
    this.scopes.setBlocked(scope, blocked);
  }

  /** Branch scopes of ctx.parallel calls that have not returned. */
  openBranches(): number {
    return this.scopes.openBranches();
  }

  /** The deterministic id of the next call of `name` in `scope`, checked against the log (R3). */
  claim(scope: string, kind: CallKind, name: string): Claim {
    return this.scopes.claim(scope, kind, name);
  }

  /** Resolves once the wait `callId` is settled and its settling event committed (R1). */
  waitFor(scope: string, callId: string): Promise<void> {
    return this.scopes.waitFor(scope, callId);
  }

  // ---- appends (run-appends.ts) ----------------------------------------------------------------

  /** R1: resolves once every event folded is committed (RunScopes.committed). */
  committed(): Promise<void> | undefined {
    return this.scopes.committed();
  }

  /** Folds and queues events; resolves when they are committed (R1, R4, R5). */
  enqueue(
    specs: readonly EventSpec[],
    extras?: Pick<AppendBatch, "claimLease"> & { release?: true },
  ): Promise<void> {
    return this.appends.enqueue(specs, extras);
  }

  /** Queues events without waiting; a failure stops the run. */
  enqueueDetached(specs: readonly EventSpec[]): void {
    this.appends.enqueueDetached(specs);
  }

  /** R9: the step's STEP_STARTED waits for the next group commit (RunAppends.deferStart). */
  deferStart(callId: string, payload: { [k: string]: Json }): void {
    this.appends.deferStart(callId, payload);
  }

  /** The start of `callId` to fold into its settling event, if it was never written (R9). */
  takeStart(callId: string): { [k: string]: Json } | undefined {
    return this.appends.takeStart(callId);
  }

  // ---- commits and parking ---------------------------------------------------------------------

  /**
   * Resolves once nothing of this run is in flight: no step running (one a returned branch left
   * behind included), no start waiting to be written, every append committed (ADR 0109 D1: a
   * continuation waits, unbounded, and never refuses on timing). Rejects if the run stops.
   */
  async quiesced(): Promise<void> {
    for (let pause = 1; ; pause = Math.min(pause * 2, 20)) {
      if (!this.live) throw this.stopError ?? new Error(`execution "${this.id}" stopped`);
      const settled = this.state.inFlight === 0 && this.appends.pendingStartCount === 0;
      if (settled && this.committedSeq === this.state.seq) return;
      // Only commits left (the usual case): wake at the commit, not at a timer's tick (over 1 ms
      // of a rotating turn); the run's end wakes it too (a barrier never settles after it).
      const barrier = settled ? this.committed() : undefined;
      if (barrier) await Promise.race([barrier, this.done.catch(() => undefined)]);
      else await new Promise((r) => setTimeout(r, pause));
    }
  }

  /** The journal committed everything through `seq` (R1: waiters wake; R8: the run may park). */
  private afterCommit(seq: number): void {
    if (seq > this.committedSeq) this.committedSeq = seq;
    if (!this.live) return;
    this.scopes.wakeSettled();
    if (this.committedSeq !== this.state.seq) return;
    if (isTerminalStatus(this.state.status)) this.terminate();
    else this.maybePark();
  }

  /** Folds events another process committed (a resume, a fired timer) into a re-activated run. */
  absorbCommitted(events: readonly Envelope[]): void {
    for (const e of events) {
      fold(this.state, e);
      this.scopes.noteSettled(e.seq);
    }
    this.committedSeq = this.state.seq;
    this.scopes.wakeSettled();
    // No park here: the caller is about to deliver, and parks the run after it if idle.
    if (isTerminalStatus(this.state.status)) this.terminate();
  }

  /** Parks an active run that has nothing to do (R8), after the park-time re-read (N2). */
  maybePark(): void {
    if (this.phase !== "active" || this.committedSeq !== this.state.seq) return;
    if (this.state.status !== "parked" || !this.scopes.quiescent()) return;
    if (this.inbox.pending()) return;
    this.phase = "parked";
    this.drive.stopTimers();
    this.drive.closeTrace();
    this.host.parked(this);
    for (const w of this.parkWatchers.splice(0)) w();
  }

  /** Resolves the next time the run parks or leaves this process. */
  whenParked(): Promise<void> {
    if (!this.live || this.phase === "parked") return Promise.resolve();
    return new Promise((r) => this.parkWatchers.push(r));
  }

  /** Back to active under a new fence; false unless the run was parked. */
  reactivate(fence: number): boolean {
    if (this.phase !== "parked") return false;
    this.fence = fence;
    this.phase = "active";
    this.drive.start("resume");
    return true;
  }

  // ---- lifecycle -----------------------------------------------------------------------------------

  /** Running attempts' provisional costs, by call id (EffectContext.provisional). */
  readonly provisionals: Map<string, () => ResourceDelta | undefined>;
  /** The reservations its calls in flight hold against its budgets (issue 20). */
  readonly reservations = new Reservations();

  /** What the running attempt of `callId` reports it has cost so far, if it reports. */
  provisional(callId: string): ResourceDelta | undefined {
    return this.attempts.provisional(callId);
  }

  /** An AbortController for one step attempt, aborted if the run stops. */
  controller(): AbortController {
    return this.attempts.controller();
  }

  release(c: AbortController): void {
    this.attempts.release(c);
  }

  /** Stops the run without recording anything (R6). */
  stop(error: Error): void {
    if (!this.live) return;
    this.phase = "stopped";
    this.stopError = error;
    this.drive.stopTimers();
    this.attempts.abortAll(error);
    this.drive.closeTrace(error);
    this.dropWaiters();
    this.settle.reject(error);
    this.host.stopped(this, error);
  }

  private terminate(): void {
    this.phase = "done";
    this.drive.stopTimers();
    // Effects still running in other branches cannot be recorded: stop them (error made if any).
    const { id, state } = this;
    const ended = this.attempts.abortAll(() =>
      state.status === "cancelled"
        ? new CancelledError(`execution "${id}" was cancelled while this step ran`)
        : new ExecutionEndedError(`execution "${id}" ended (${state.status}) while this step ran`),
    );
    this.drive.closeTrace(undefined, ended);
    this.dropWaiters();
    this.settle.resolve(outcomeOf(this.state));
    this.host.ended(this);
  }

  /** The run left this process: its waits never settle (R6), and whoever awaits a park goes on. */
  private dropWaiters(): void {
    this.scopes.dropWaiters();
    for (const w of this.parkWatchers.splice(0)) w();
  }

  /**
   * K8.3: true once the execution is past its deadline, which cancels it (once), like a cancel
   * from outside, with DeadlineExceededError. An active run's timer calls it, every syscall before
   * it starts (context.ts) and the body's end, so a run woken or recovered past its deadline runs
   * no further step, nor completes. A parked execution nobody wakes stays parked until then.
   */
  pastDeadline(): boolean {
    return this.drive.pastDeadline();
  }

  /** Cancels the execution for its deadline (the timer's verdict stands, whatever the clock). */
  private deadlineExceeded(): void {
    if (!this.active || isTerminalStatus(this.state.status)) return;
    const reason = `its deadline of ${this.state.deadlineMs ?? 0} ms passed`;
    const error = new DeadlineExceededError(`execution "${this.id}" was cancelled: ${reason}`);
    this.enqueueDetached(
      cancelSpecs(this.state, reason, this.host.clock.now(), error, (id) => this.provisional(id)),
    );
  }
}
