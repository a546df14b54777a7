/**
 * A Run drives one execution's flow body in this process.
 *
 * Invariants (tests cite R1..R8):
 * R1. Every event is folded into `state` when it is queued, and what the body observes (a step's
 *     result, a resume's payload, a fired timer) is released only after the event that made it
 *     committed: a waiter wakes when its settling sequence number is committed.
 * R2. A call the log already answers is answered from the fold, never re-executed.
 * R3. A re-run that asks for a different call than the log recorded at the same position of the
 *     same scope stops the run with NonDeterminismError naming both; nothing is appended.
 * R4. Nothing is appended after a terminal event, and nothing after the run stopped.
 * R5. Every append carries the run's fence; a refused append stops the run (a zombie writes
 *     nothing).
 * R6. A run that stopped (fenced, evicted, closed, non-deterministic) never settles its body's
 *     outstanding calls: the body halts where it is, and no catch block of the flow runs for a
 *     reason that is not a fact in the log.
 * R7. Calls in one scope are sequential: a call made while another of the same scope is
 *     outstanding is refused (InvalidInputError) before anything is appended. Concurrency goes
 *     through ctx.parallel, whose branches are scopes of their own.
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
  InvalidInputError,
  InvariantViolation,
  NonDeterminismError,
  errorToData,
} from "../kernel/errors.ts";
import { jsonText, type Json } from "../kernel/json.ts";
import type { ResourceDelta } from "../kernel/resources.ts";
import { cancelSpecs } from "./cancel-specs.ts";
import { armDeadline } from "./deadline.ts";
import { validated } from "../kernel/schema.ts";
import { fold } from "../fold/fold.ts";
import { indexChanges } from "../fold/index-changes.ts";
import type { Flow } from "./flow.ts";
import type { AppendBatch } from "../store/spi.ts";
import type { EventSpec } from "./journal.ts";

export type { EventSpec } from "./journal.ts";
import { outcomeOf, type Outcome } from "./outcome.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";
import { cursorOf, deliverySpecs, waitingReceives } from "./inbox.ts";
import type { DriveSpan, DriveStart } from "./tracing.ts";
import type { Clock } from "../kernel/clock.ts";
import type { InboxMessage } from "../store/spi.ts";
import type { Journal } from "./journal.ts";
import type { Tracing } from "./tracing.ts";

interface Scope {
  pos: number;
  names: Map<string, number>;
  parallels: number;
  /** The call this scope is making, if any (R7). */
  busy: string | undefined;
  /** Waiting on a wait or on its parallel branches. */
  blocked: boolean;
  live: boolean;
}

interface Waiter {
  scope: string;
  resolve: () => void;
  /** The sequence number whose commit releases the waiter. */
  settleSeq: number | undefined;
  /** A local timer may be armed for the wait (only waitFor arms one). */
  armed: boolean;
}

export interface Claim {
  callId: string;
  /** True when the log already has this call (R2). */
  recorded: boolean;
  /** Takes the position for a new call; call it in the same turn as the append. */
  take(): void;
}

export type RunPhase = "active" | "parked" | "done" | "stopped";

/** A claim of a call the log does not have yet: `take` moves the scope's cursor past it. */
class NewCall implements Claim {
  readonly recorded = false;
  constructor(
    readonly callId: string,
    private readonly cursor: Scope,
    private readonly name: string,
    private readonly occurrence: number,
  ) {}

  take(): void {
    this.cursor.pos++;
    this.cursor.names.set(this.name, this.occurrence + 1);
  }
}

function nothing(): void {}

/**
 * `{ ...base, ...more }`, made with Object.assign: V8 (Node 20) serialises an object made by a
 * leading spread three to five times slower (about 5 µs against 1.5 for a step's settling
 * payload), and these payloads are serialised on every step.
 */
export function merged(
  base: { [k: string]: Json } | undefined,
  more: { [k: string]: Json },
): { [k: string]: Json } {
  return Object.assign(Object.assign({}, base), more);
}

/** A promise that never settles: what a halted body waits on (R6). */
export function halted<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}

/** What a Run needs from its runtime; the runtime implements it. */
export interface RunHost {
  readonly clock: Clock;
  readonly journal: Journal;
  readonly leaseTtlMs: number;
  readonly ownerId: string;
  /** The fewest events between snapshots (see Run.snapshotFor). */
  readonly snapshotEvery: number;
  /** Opens the span of each drive (tracing.ts). */
  readonly tracing: Tracing;
  /** Validates a flow's return value against the output bound. */
  boundOutput(value: unknown, flowName: string): Json | undefined;
  /** The run's body waits on something only the outside world settles. */
  parked(run: Run): void;
  /** The run recorded a terminal event (whose batch released the lease). */
  ended(run: Run): void;
  /** The run stopped without an outcome (fenced, non-determinism, closing). */
  stopped(run: Run, error: Error): void;
  renew(run: Run): void;
  armTimer(executionId: string, callId: string, wakeAtMs: number): void;
  disarmTimer(executionId: string, callId: string): void;
  /** A topic's messages in a chain's inbox past `afterSeq` (one batch). */
  readInbox(chainId: string, topic: string, afterSeq: number): Promise<InboxMessage[]>;
  /** Reports an error no caller awaits. */
  report(error: unknown): void;
}

export class Run {
  readonly id: string;
  state: ExecutionState;
  fence: number;
  committedSeq: number;
  phase: RunPhase = "active";
  stopError: Error | undefined;
  lastSnapshotSeq: number;
  /** Its body called ctx.continueAsNew: it ends `continued` (ADR 0109); outside input waits. */
  rotating = false;
  /**
   * No other owner has held this execution's lease since this runtime last drove it: true for a
   * run made from a state read under its lease, and set again each time it is reactivated
   * (runtime-core.ts ownedRun).
   */
  untouched = true;
  /** The span of this drive, while it records (tracing.ts): steps start theirs under it. */
  trace: DriveSpan | undefined;
  /** Rough size of what the run holds in memory, for the cache's byte bound. */
  approxBytes = 0;
  private bytesSinceSnapshot = 0;
  private lastSnapshotBytes = 0;
  readonly done: Promise<Outcome>;
  private settle!: { resolve: (o: Outcome) => void; reject: (e: Error) => void };
  private readonly scopes = new Map<string, Scope>();
  private readonly waiters = new Map<string, Waiter>();
  private readonly controllers = new Set<AbortController>();
  /**
   * Steps running whose STEP_STARTED is not written yet (R9): the start's payload, `startedAt`
   * included, owned by whichever takes it (the writer or the settling event).
   */
  private readonly pendingStarts = new Map<string, { [k: string]: Json }>();
  private heartbeat: NodeJS.Timeout | undefined;
  private disarmDeadline: (() => void) | undefined;
  private parkWatchers: (() => void)[] = [];
  /** The park-time inbox re-read in flight, and the sequence number it last ran at (N2). */
  private inboxRead: Promise<void> | undefined;
  private inboxReadAt = -1;

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
    this.lastSnapshotSeq = state.seq;
    this.done = new Promise<Outcome>((resolve, reject) => (this.settle = { resolve, reject }));
    this.done.catch(() => undefined);
    this.scope("");
  }

  get active(): boolean {
    return this.phase === "active";
  }

  get live(): boolean {
    return this.phase === "active" || this.phase === "parked";
  }

  /** Runs the body from the top; the fold answers every call it already recorded. */
  startBody(ctx: unknown): void {
    this.beat();
    // A body with calls in the log re-runs over them (T2: one span per drive).
    this.openTrace(this.state.order[""]?.length ? "replay" : "start");
    const body = this.flow.body as (ctx: unknown, input: unknown) => Promise<unknown>;
    void (async () => {
      let output: unknown;
      try {
        const input = this.state.input;
        output = await body(
          ctx,
          input !== null && typeof input === "object" ? structuredClone(input) : input,
        );
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
    const payload: Json = json === undefined ? {} : { output: json };
    await this.enqueue([{ kind: "EXECUTION_COMPLETED", payload, kernel: true }]).catch(
      () => undefined,
    );
  }

  private async finishFailed(thrown: unknown): Promise<void> {
    if (!this.live) return;
    const payload: Json = { error: errorToData(thrown) as unknown as Json };
    await this.enqueue([{ kind: "EXECUTION_FAILED", payload, kernel: true }]).catch(
      () => undefined,
    );
  }

  // ---- scopes ----------------------------------------------------------------------------------

  private scope(name: string): Scope {
    let s = this.scopes.get(name);
    if (!s) {
      s = { pos: 0, names: new Map(), parallels: 0, busy: undefined, blocked: false, live: true };
      this.scopes.set(name, s);
    }
    return s;
  }

  /** Marks `scope` as making call `what`; refuses a second outstanding call (R7). */
  begin(scope: string, what: string): void {
    const s = this.scope(scope);
    if (!s.live) {
      throw new InvalidInputError(
        `${what} was called from a ctx.parallel branch that already returned; await every call before a branch returns`,
      );
    }
    if (s.busy !== undefined) {
      throw new InvalidInputError(
        `${what} was called while ${s.busy} of the same scope is still running: calls in one scope must be awaited one at a time ` +
          "(use ctx.parallel for concurrency; a step's function cannot make ctx calls)",
      );
    }
    s.busy = what;
  }

  end(scope: string): void {
    this.scope(scope).busy = undefined;
  }

  /** A new branch scope of a ctx.parallel in `parent`. */
  branchScopes(parent: string, count: number): string[] {
    const p = this.scope(parent);
    const base = `${parent}par${p.parallels++}.`;
    return Array.from({ length: count }, (_, i) => {
      const name = `${base}${i}/`;
      this.scope(name).live = true;
      return name;
    });
  }

  branchDone(scope: string): void {
    this.scope(scope).live = false;
    this.maybePark();
  }

  setBlocked(scope: string, blocked: boolean): void {
    this.scope(scope).blocked = blocked;
    if (blocked) this.maybePark();
  }

  /**
   * Resolves once nothing of this run is in flight: no step running (one a returned branch left
   * behind included), no start waiting to be written, every append committed (ADR 0109 D1: a
   * continuation waits, unbounded, and never refuses on timing). Rejects if the run stops.
   */
  async quiesced(): Promise<void> {
    for (let pause = 1; ; pause = Math.min(pause * 2, 20)) {
      if (!this.live) throw this.stopError ?? new Error(`execution "${this.id}" stopped`);
      const idle =
        this.state.inFlight === 0 &&
        this.pendingStarts.size === 0 &&
        this.committedSeq === this.state.seq;
      if (idle) return;
      await new Promise((r) => setTimeout(r, pause));
    }
  }

  /** Branch scopes of ctx.parallel calls that have not returned. */
  openBranches(): number {
    let n = 0;
    for (const [name, sc] of this.scopes) if (name !== "" && sc.live) n++;
    return n;
  }

  private quiescent(): boolean {
    for (const s of this.scopes.values()) if (s.live && !s.blocked) return false;
    return true;
  }

  /** The deterministic id of the next call of `name` in `scope`, checked against the log (R3). */
  claim(scope: string, kind: CallKind, name: string): Claim {
    const cursor = this.scope(scope);
    const occurrence = cursor.names.get(name) ?? 0;
    const callId = `${scope}${name}#${occurrence}`;
    const entry = `${kind}:${callId}`;
    const order = Object.hasOwn(this.state.order, scope) ? this.state.order[scope] : undefined;
    const recordedEntry = order?.[cursor.pos];
    if (recordedEntry !== undefined) {
      if (recordedEntry !== entry) throw this.diverged(scope, cursor.pos, recordedEntry, entry);
      cursor.pos++;
      cursor.names.set(name, occurrence + 1);
      return { callId, recorded: true, take: nothing };
    }
    if (Object.hasOwn(this.state.frames, callId) || Object.hasOwn(this.state._decisions, callId)) {
      throw this.diverged(scope, cursor.pos, "nothing", entry);
    }
    return new NewCall(callId, cursor, name, occurrence);
  }

  private diverged(scope: string, pos: number, recorded: string, asked: string): Error {
    const where = scope === "" ? "the flow body" : `scope "${scope}"`;
    const error = new NonDeterminismError(
      `execution "${this.id}" of flow "${this.flow.name}": call ${pos} of ${where} was recorded as ${recorded} but the flow now asks for ${asked}`,
      { executionId: this.id, scope, position: pos, recorded, asked },
    );
    this.stop(error);
    return error;
  }

  // ---- appends -----------------------------------------------------------------------------------

  /** Folds and queues events; resolves when they are committed (R1, R4, R5). */
  enqueue(
    specs: readonly EventSpec[],
    extras?: Pick<AppendBatch, "claimLease"> & { release?: true },
  ): Promise<void> {
    if (!this.live) return Promise.reject(this.stopError ?? this.endedError());
    if (isTerminalStatus(this.state.status)) return Promise.reject(this.endedError());
    const at = this.host.clock.now();
    const expectedSeq = this.state.seq + 1;
    const events: Envelope[] = specs.map((s, i) => ({
      executionId: this.id,
      seq: expectedSeq + i,
      kind: s.kind,
      at,
      payload: s.payload,
      meta: s.kernel ? { kernel: true, fence: this.fence } : { fence: this.fence },
    }));
    for (const e of events) {
      fold(this.state, e);
      this.noteSettled(e.seq);
      // An estimate for the cache's byte bound and the snapshot policy (UTF-16 length).
      const bytes = jsonText(e.payload).length + 64;
      this.approxBytes += bytes;
      this.bytesSinceSnapshot += bytes;
    }
    if (this.state.seq !== expectedSeq + events.length - 1) {
      throw new InvariantViolation(`fold of ${this.id} did not advance over its own events`);
    }
    const lastSeq = this.state.seq;
    const batch: AppendBatch = {
      executionId: this.id,
      events,
      expectedSeq,
      fence: this.fence,
      status: this.state.status,
      flow: this.state.flow,
      // The state after the batch: a terminal one also writes the supervisors' wake rows.
      index: indexChanges(events, this.state),
    };
    if (extras?.claimLease) batch.claimLease = extras.claimLease;
    if (this.state._subject !== undefined) batch.subject = this.state._subject;
    if (isTerminalStatus(this.state.status) || extras?.release) {
      batch.releaseLease = this.host.ownerId;
    }
    const snapshot = this.snapshotFor();
    if (snapshot) batch.snapshot = snapshot;
    return this.host.journal.append(batch).then(
      () => this.afterCommit(lastSeq),
      (e: unknown) => {
        const error = e instanceof Error ? e : new Error(String(e));
        this.stop(error);
        throw error;
      },
    );
  }

  /**
   * A snapshot rides the batch that crosses the policy: at least `snapshotEvery` events since the
   * last one, and at least as many bytes appended since as the last snapshot had. The second rule
   * keeps the cost per appended byte constant however large the state grows.
   */
  private snapshotFor(): AppendBatch["snapshot"] {
    if (this.state.seq - this.lastSnapshotSeq < this.host.snapshotEvery) return undefined;
    if (this.bytesSinceSnapshot < this.lastSnapshotBytes) return undefined;
    const stateJson = JSON.stringify(this.state);
    this.lastSnapshotSeq = this.state.seq;
    this.lastSnapshotBytes = stateJson.length;
    this.bytesSinceSnapshot = 0;
    return { seq: this.state.seq, stateJson };
  }

  /**
   * R9: a new step's STEP_STARTED is written at the next group commit only if the step is still
   * running then; a step that settles first writes one event, its STEP_COMPLETED or STEP_FAILED,
   * carrying the start (`scope`, `name`, `input`, `startedAt`). A long step's start is durable
   * within one turn of the event loop; a fast step costs one event instead of two.
   */
  deferStart(callId: string, payload: { [k: string]: Json }): void {
    this.pendingStarts.set(callId, merged(payload, { startedAt: this.host.clock.now() }));
    this.host.journal.atNextFlush(this.startsWriter);
  }

  /** One writer per run (the journal keeps a set of them): made once, not per step. */
  private readonly startsWriter = (): void => this.writeStarts();

  /**
   * The start of `callId` to fold into its settling event, if it was never written: a fresh
   * object the caller owns (it adds the settling fields to it).
   */
  takeStart(callId: string): { [k: string]: Json } | undefined {
    const pending = this.pendingStarts.get(callId);
    if (pending) this.pendingStarts.delete(callId);
    return pending;
  }

  private writeStarts(): void {
    if (!this.active || this.pendingStarts.size === 0) return;
    const starts = [...this.pendingStarts.values()];
    this.pendingStarts.clear();
    this.enqueueDetached(starts.map((payload) => ({ kind: "STEP_STARTED", payload })));
  }

  /** Queues events without waiting; a failure stops the run. */
  enqueueDetached(specs: readonly EventSpec[]): void {
    this.enqueue(specs).catch(() => undefined);
  }

  private afterCommit(seq: number): void {
    if (seq > this.committedSeq) this.committedSeq = seq;
    if (!this.live) return;
    this.wakeSettled();
    if (this.committedSeq !== this.state.seq) return;
    if (isTerminalStatus(this.state.status)) this.terminate();
    else this.maybePark();
  }

  /** Folds events another process committed (a resume, a fired timer) into a re-activated run. */
  absorbCommitted(events: readonly Envelope[]): void {
    for (const e of events) {
      fold(this.state, e);
      this.noteSettled(e.seq);
    }
    this.committedSeq = this.state.seq;
    this.wakeSettled();
    // No park here: the caller is about to deliver, and parks the run after it if idle.
    if (isTerminalStatus(this.state.status)) this.terminate();
  }

  /** Parks an active run that has nothing to do (R8), after the park-time re-read (N2). */
  maybePark(): void {
    if (this.phase !== "active" || this.committedSeq !== this.state.seq) return;
    if (this.state.status !== "parked" || !this.quiescent()) return;
    if (this.rereadInbox()) return;
    this.phase = "parked";
    this.stopBeat();
    this.closeTrace();
    this.host.parked(this);
    for (const w of this.parkWatchers.splice(0)) w();
  }

  /**
   * N2: before a run parks with receives waiting, it reads its chain's inbox once more (once per
   * sequence number), so a message sent while the wait was being registered is taken, not left.
   * True while that read is in flight: the run parks when it finds nothing.
   */
  private rereadInbox(): boolean {
    if (this.inboxRead !== undefined) return true;
    // Every open wait a suspend: no receive waits, and no frame scan on this hot path.
    if (this.state.openWaits <= this.state._openSuspends.length) return false;
    const topics = new Set<string>();
    for (const callId of waitingReceives(this.state)) {
      const topic = this.state.frames[callId]?.topic;
      if (topic !== undefined) topics.add(topic);
    }
    if (topics.size === 0 || this.inboxReadAt === this.state.seq) return false;
    const seq = this.state.seq;
    const chainId = chainOf(this.state).chainId;
    this.inboxRead = Promise.all(
      [...topics].map(async (topic) => {
        const messages = await this.host.readInbox(chainId, topic, cursorOf(this.state, topic));
        return { topic, messages };
      }),
    ).then(
      (reads) => {
        this.inboxRead = undefined;
        this.inboxReadAt = seq;
        if (!this.active) return;
        const specs = reads.flatMap((r) => deliverySpecs(this.state, r.topic, r.messages));
        if (specs.length > 0) this.enqueueDetached(specs);
        else this.maybePark();
      },
      (e: unknown) => {
        // The messages stay in the stream: the next send or re-read delivers them.
        this.inboxRead = undefined;
        this.inboxReadAt = seq;
        this.host.report(e);
        this.maybePark();
      },
    );
    return true;
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
    this.beat();
    this.openTrace("resume");
    return true;
  }

  // ---- waits ---------------------------------------------------------------------------------------

  /** Resolves once the wait `callId` is settled and its settling event committed (R1). */
  waitFor(scope: string, callId: string): Promise<void> {
    if (!this.live) return halted();
    return new Promise<void>((resolve) => {
      const f = this.state.frames[callId];
      const waiting = f?.status === "waiting";
      const wakeAtMs = f?.wakeAtMs;
      const arm = waiting && wakeAtMs !== undefined;
      this.waiters.set(callId, {
        scope,
        resolve,
        settleSeq: waiting ? undefined : this.state.seq,
        armed: arm || this.waiters.get(callId)?.armed === true,
      });
      if (arm) this.host.armTimer(this.id, callId, wakeAtMs);
      this.scope(scope).blocked = true;
      this.wakeSettled();
      this.maybePark();
    });
  }

  private noteSettled(seq: number): void {
    if (this.waiters.size === 0) return;
    for (const [callId, w] of this.waiters) {
      if (w.settleSeq === undefined && this.state.frames[callId]?.status !== "waiting")
        w.settleSeq = seq;
    }
  }

  private wakeSettled(): void {
    if (this.waiters.size === 0) return;
    for (const [callId, w] of this.waiters) {
      if (w.settleSeq === undefined || w.settleSeq > this.committedSeq) continue;
      this.waiters.delete(callId);
      if (w.armed) this.host.disarmTimer(this.id, callId);
      this.scope(w.scope).blocked = false;
      w.resolve();
    }
  }

  // ---- lifecycle -----------------------------------------------------------------------------------

  /** Running attempts' provisional costs, by call id (EffectContext.provisional). */
  readonly provisionals = new Map<string, () => ResourceDelta | undefined>();

  /** What the running attempt of `callId` reports it has cost so far, if it reports. */
  provisional(callId: string): ResourceDelta | undefined {
    try {
      return this.provisionals.get(callId)?.();
    } catch {
      return undefined;
    }
  }

  /** An AbortController for one step attempt, aborted if the run stops. */
  controller(): AbortController {
    const c = new AbortController();
    if (!this.live) {
      c.abort(this.stopError ?? new ExecutionEndedError(`execution "${this.id}" has ended`));
    }
    this.controllers.add(c);
    return c;
  }

  release(c: AbortController): void {
    this.controllers.delete(c);
  }

  /** Stops the run without recording anything (R6). */
  stop(error: Error): void {
    if (!this.live) return;
    this.phase = "stopped";
    this.stopError = error;
    this.stopBeat();
    for (const c of this.controllers) c.abort(error);
    this.controllers.clear();
    this.closeTrace(error);
    this.dropWaiters();
    this.settle.reject(error);
    this.host.stopped(this, error);
  }

  private terminate(): void {
    this.phase = "done";
    this.stopBeat();
    // An effect still running in another branch can no longer be recorded: stop it.
    const ended =
      this.state.status === "cancelled"
        ? new CancelledError(`execution "${this.id}" was cancelled while this step ran`)
        : new ExecutionEndedError(
            `execution "${this.id}" ended (${this.state.status}) while this step ran`,
          );
    for (const c of this.controllers) c.abort(ended);
    this.controllers.clear();
    this.closeTrace(undefined, ended);
    this.dropWaiters();
    this.settle.resolve(outcomeOf(this.state));
    this.host.ended(this);
  }

  private openTrace(how: DriveStart): void {
    this.closeTrace();
    this.trace = this.host.tracing.drive(this.state, how);
  }

  /**
   * Ends this drive's span: parked or ended as the state says, or stopped by `stop`; a step
   * still running is ended as cut short by `stop` or `cut` (its abort reason).
   */
  private closeTrace(stop?: Error, cut?: Error): void {
    const trace = this.trace;
    if (trace === undefined) return;
    this.trace = undefined;
    trace.end(this.state, stop, cut);
  }

  private dropWaiters(): void {
    for (const callId of this.waiters.keys()) this.host.disarmTimer(this.id, callId);
    this.waiters.clear();
    for (const w of this.parkWatchers.splice(0)) w();
  }

  private endedError(): Error {
    return new InvariantViolation(
      `execution "${this.id}" has ended (${this.state.status}); its flow body made a call after it returned`,
    );
  }

  /** While the run is active: renew its lease, and watch its deadline. */
  private beat(): void {
    this.stopBeat();
    const every = Math.max(10, Math.floor(this.host.leaseTtlMs / 3));
    this.heartbeat = setInterval(() => this.host.renew(this), every);
    this.heartbeat.unref();
    const budget = this.state.deadlineMs;
    if (budget !== undefined) {
      const at = this.state.startedAt + budget;
      this.disarmDeadline = armDeadline(this.host.clock, at, budget, () => this.deadlineExceeded());
    }
  }

  private stopBeat(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.disarmDeadline?.();
    this.disarmDeadline = undefined;
  }

  /**
   * K8.3: true once the execution is past its deadline, which cancels it (once), like a cancel
   * from outside, with DeadlineExceededError. An active run's timer calls it, and so does every
   * syscall before it starts (context.ts), so a run woken or recovered past its deadline runs no
   * further step. A parked execution nobody wakes stays parked until something does.
   */
  pastDeadline(): boolean {
    const budget = this.state.deadlineMs;
    if (budget === undefined || this.host.clock.now() - this.state.startedAt < budget) {
      return false;
    }
    this.deadlineExceeded();
    return true;
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
