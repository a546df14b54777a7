/**
 * A Run drives one execution's flow body in this process.
 *
 * Invariants (tests cite R1..R7):
 * R1. Every event is folded into `state` when it is queued, and the state a caller observes
 *     (a step's result, a resume's payload) is released only after the event that made it is
 *     committed: waiters wake, and the run parks, only when `committedSeq === state.seq`.
 * R2. A call the log already answers is answered from the fold, never re-executed.
 * R3. A re-run that asks for a different call than the log recorded at the same position of the
 *     same scope stops with NonDeterminismError naming both; nothing is appended.
 * R4. Nothing is appended after a terminal event, and nothing after the run stopped.
 * R5. Every append carries the run's fence; a refused append stops the run (a zombie writes
 *     nothing).
 * R6. A run that stopped settles its body's outstanding calls with the stop error and ignores
 *     whatever the body does afterwards.
 * R7. Calls in one scope are sequential: the body awaits each before making the next. Concurrent
 *     work goes through ctx.parallel, whose branches are scopes of their own.
 */
import type { CallKind, Envelope, EventKind } from "../kernel/events.ts";
import { isTerminalStatus } from "../kernel/events.ts";
import {
  InvariantViolation,
  NonDeterminismError,
  errorToData,
  type ErrorData,
} from "../kernel/errors.ts";
import { jsonBytes, type Json } from "../kernel/json.ts";
import { fold } from "../fold/fold.ts";
import { indexChanges } from "../fold/index-changes.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { Flow } from "./flow.ts";
import type { RunHost } from "./run-host.ts";

export interface Outcome {
  status: "completed" | "failed" | "cancelled" | "continued";
  output?: Json;
  error?: ErrorData;
  continuedTo?: string;
}

export interface EventSpec {
  kind: EventKind;
  payload: Json;
  kernel?: true;
}

interface Cursor {
  pos: number;
  names: Map<string, number>;
  parallels: number;
}

export interface Claim {
  callId: string;
  /** True when the log already has this call (R2). */
  recorded: boolean;
  /** Takes the position for a new call; call it in the same turn as the append. */
  take(): void;
}

export type RunPhase = "active" | "parked" | "done" | "stopped";

export class Run {
  readonly id: string;
  state: ExecutionState;
  fence: number;
  committedSeq: number;
  phase: RunPhase = "active";
  stopError: Error | undefined;
  lastSnapshotSeq: number;
  /** Rough size of what the run holds in memory, for the cache's byte bound. */
  approxBytes = 0;
  readonly done: Promise<Outcome>;
  private settle!: { resolve: (o: Outcome) => void; reject: (e: Error) => void };
  private cursors = new Map<string, Cursor>();
  private waiters = new Map<string, { resolve: () => void; reject: (e: Error) => void }>();
  private controllers = new Set<AbortController>();
  private heartbeat: NodeJS.Timeout | undefined;

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
  }

  get live(): boolean {
    return this.phase === "active" || this.phase === "parked";
  }

  /** Runs the body from the top; the fold answers every call it already recorded. */
  startBody(ctx: unknown): void {
    this.beat();
    const body = this.flow.body as (ctx: unknown, input: unknown) => Promise<unknown>;
    void (async () => {
      let output: unknown;
      try {
        output = await body(ctx, this.state.input);
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
      json = this.host.boundOutput(output, this.flow.name);
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
    if (thrown instanceof NonDeterminismError) {
      this.stop(thrown);
      return;
    }
    const payload: Json = { error: errorToData(thrown) as unknown as Json };
    await this.enqueue([{ kind: "EXECUTION_FAILED", payload, kernel: true }]).catch(
      () => undefined,
    );
  }

  /** The deterministic id of the next call of `name` in `scope`, checked against the log (R3). */
  claim(scope: string, kind: CallKind, name: string): Claim {
    this.assertLive();
    let c = this.cursors.get(scope);
    if (!c) {
      c = { pos: 0, names: new Map(), parallels: 0 };
      this.cursors.set(scope, c);
    }
    const cursor = c;
    const occurrence = cursor.names.get(name) ?? 0;
    const callId = `${scope}${name}#${occurrence}`;
    const entry = `${kind}:${callId}`;
    const order = Object.hasOwn(this.state.order, scope) ? this.state.order[scope] : undefined;
    const recordedEntry = order?.[cursor.pos];
    const take = () => {
      cursor.pos++;
      cursor.names.set(name, occurrence + 1);
    };
    if (recordedEntry !== undefined) {
      if (recordedEntry !== entry) throw this.diverged(scope, cursor.pos, recordedEntry, entry);
      take();
      return { callId, recorded: true, take: () => undefined };
    }
    if (Object.hasOwn(this.state.frames, callId) || Object.hasOwn(this.state._decisions, callId)) {
      throw this.diverged(scope, cursor.pos, "nothing", entry);
    }
    return { callId, recorded: false, take };
  }

  /** The scope of the next ctx.parallel in `scope`. */
  nextParallelScope(scope: string): string {
    let c = this.cursors.get(scope);
    if (!c) {
      c = { pos: 0, names: new Map(), parallels: 0 };
      this.cursors.set(scope, c);
    }
    return `${scope}par${c.parallels++}.`;
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

  /** Folds and queues events; resolves when they are committed (R1, R4, R5). */
  enqueue(specs: readonly EventSpec[]): Promise<void> {
    if (!this.live) return Promise.reject(this.stopError ?? this.endedError());
    if (isTerminalStatus(this.state.status)) return Promise.reject(this.endedError());
    const at = this.host.clock.now();
    const events: Envelope[] = specs.map((s, i) => {
      const e: Envelope = {
        executionId: this.id,
        seq: this.state.seq + 1 + i,
        kind: s.kind,
        at,
        payload: s.payload,
        meta: s.kernel ? { kernel: true, fence: this.fence } : { fence: this.fence },
      };
      return e;
    });
    const expectedSeq = this.state.seq + 1;
    for (const e of events) {
      fold(this.state, e);
      this.approxBytes += jsonBytes(e.payload) + 64;
    }
    if (this.state.seq !== expectedSeq + events.length - 1) {
      throw new InvariantViolation(`fold of ${this.id} did not advance over its own events`);
    }
    const lastSeq = this.state.seq;
    return this.host.journal
      .append({
        executionId: this.id,
        events,
        expectedSeq,
        fence: this.fence,
        status: this.state.status,
        flow: this.state.flow,
        index: indexChanges(events),
      })
      .then(
        () => this.afterCommit(lastSeq),
        (e: unknown) => {
          const error = e instanceof Error ? e : new Error(String(e));
          this.stop(error);
          throw error;
        },
      );
  }

  /** Queues events without waiting; a failure stops the run (the body sees it at its next call). */
  enqueueDetached(specs: readonly EventSpec[]): void {
    this.enqueue(specs).catch(() => undefined);
  }

  private afterCommit(seq: number): void {
    if (seq > this.committedSeq) this.committedSeq = seq;
    if (!this.live || this.committedSeq !== this.state.seq) return;
    this.host.maybeSnapshot(this);
    if (isTerminalStatus(this.state.status)) {
      this.end();
      return;
    }
    this.wakeSettled();
    if (this.state.status === "parked" && this.phase === "active") {
      this.phase = "parked";
      this.stopBeat();
      this.host.parked(this);
    }
  }

  /** Folds events another process committed (a resume, a fired timer) into a re-activated run. */
  absorbCommitted(events: readonly Envelope[]): void {
    if (events.length === 0) return;
    for (const e of events) fold(this.state, e);
    this.committedSeq = this.state.seq;
    if (isTerminalStatus(this.state.status)) this.afterCommit(this.state.seq);
    else this.wakeSettled();
  }

  /** Parks an active run that has nothing to do (after a delivery that appended nothing). */
  parkIfIdle(): void {
    if (this.phase === "active" && this.committedSeq === this.state.seq)
      this.afterCommit(this.state.seq);
  }

  /** Back to active under a new fence (the lease was re-acquired). */
  reactivate(fence: number): void {
    this.fence = fence;
    this.phase = "active";
    this.beat();
  }

  /** Resolves when the wait `callId` is no longer waiting, after its settling event committed. */
  waitFor(callId: string): Promise<void> {
    this.assertLive();
    return new Promise<void>((resolve, reject) => {
      this.waiters.set(callId, { resolve, reject });
      const f = this.state.frames[callId];
      if (f?.wakeAtMs !== undefined) this.host.armTimer(this.id, callId, f.wakeAtMs);
      if (this.committedSeq === this.state.seq) this.wakeSettled();
    });
  }

  private wakeSettled(): void {
    for (const [callId, w] of this.waiters) {
      const f = this.state.frames[callId];
      if (f && f.status !== "waiting") {
        this.waiters.delete(callId);
        this.host.disarmTimer(this.id, callId);
        w.resolve();
      }
    }
  }

  /** An AbortController for one step attempt, aborted if the run stops. */
  controller(): AbortController {
    const c = new AbortController();
    if (!this.live) c.abort(this.stopError);
    this.controllers.add(c);
    return c;
  }

  release(c: AbortController): void {
    this.controllers.delete(c);
  }

  /** Stops the run without recording anything (R6): fenced, non-determinism, closing. */
  stop(error: Error): void {
    if (!this.live) return;
    this.phase = "stopped";
    this.stopError = error;
    this.stopBeat();
    for (const c of this.controllers) c.abort(error);
    this.controllers.clear();
    for (const [callId, w] of this.waiters) {
      this.host.disarmTimer(this.id, callId);
      w.reject(error);
    }
    this.waiters.clear();
    this.settle.reject(error);
    this.host.stopped(this, error);
  }

  private end(): void {
    this.phase = "done";
    this.stopBeat();
    for (const [callId] of this.waiters) this.host.disarmTimer(this.id, callId);
    this.waiters.clear();
    this.settle.resolve(outcomeOf(this.state));
    this.host.ended(this);
  }

  assertLive(): void {
    if (this.phase === "stopped") throw this.stopError ?? this.endedError();
    if (this.phase === "done") throw this.endedError();
  }

  private endedError(): Error {
    return new InvariantViolation(
      `execution "${this.id}" has ended (${this.state.status}); its flow body made a call after it returned`,
    );
  }

  private beat(): void {
    this.stopBeat();
    const every = Math.max(10, Math.floor(this.host.leaseTtlMs / 3));
    this.heartbeat = setInterval(() => this.host.renew(this), every);
    this.heartbeat.unref();
  }

  private stopBeat(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }
}

export function outcomeOf(state: ExecutionState): Outcome {
  switch (state.status) {
    case "completed":
      return state.output === undefined
        ? { status: "completed" }
        : { status: "completed", output: state.output };
    case "failed":
    case "cancelled":
      return state.error ? { status: state.status, error: state.error } : { status: state.status };
    case "continued":
      return { status: "continued" };
    default:
      throw new InvariantViolation(
        `execution "${state.executionId}" has not ended (${state.status})`,
      );
  }
}
