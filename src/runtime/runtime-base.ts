/**
 * The part of the runtime's face (runtime.ts) that only reads its state or hands a run's callbacks
 * to it: the getters, and the RunHost callbacks a run makes (run.ts). Its own module so that the
 * face's verbs fit in runtime.ts; the Runtime class extends it, and users see one class.
 */
import type { Json } from "../kernel/json.ts";
import type { Clock } from "../kernel/clock.ts";
import type { Limits } from "../kernel/limits.ts";
import type { InboxMessage, Store } from "../store/spi.ts";
import type { Journal } from "./journal.ts";
import type { Tracing } from "./tracing.ts";
import type { Run } from "./run.ts";
import type { RuntimeState } from "./runtime-state.ts";

export class RuntimeFace {
  /** Everything this runtime holds (runtime.ts W7). */
  protected readonly state: RuntimeState;

  constructor(state: RuntimeState) {
    this.state = state;
  }

  get store(): Store {
    return this.state.store;
  }
  get clock(): Clock {
    return this.state.clock;
  }
  get journal(): Journal {
    return this.state.journal;
  }
  get leaseTtlMs(): number {
    return this.state.leaseTtlMs;
  }
  get ownerId(): string {
    return this.state.ownerId;
  }
  get limits(): Limits {
    return this.state.limits;
  }
  get snapshotEvery(): number {
    return this.state.snapshotEvery;
  }
  get tracing(): Tracing {
    return this.state.tracing;
  }
  /** Runs this runtime stopped because another owner took their lease over (fleet L2). */
  get fencedRuns(): number {
    return this.state.fencedRuns;
  }

  // The callbacks a run makes (RunHost, run.ts) are the state's: runs are driven with the state
  // as their host. They stay on the face so that its surface does not change.
  boundOutput(value: unknown, flowName: string): Json | undefined {
    return this.state.boundOutput(value, flowName);
  }
  parked(run: Run): void {
    this.state.parked(run);
  }
  ended(run: Run): void {
    this.state.ended(run);
  }
  stopped(run: Run, error: Error): void {
    this.state.stopped(run, error);
  }
  renew(run: Run): void {
    this.state.renew(run);
  }
  readInbox(chainId: string, topic: string, afterSeq: number): Promise<InboxMessage[]> {
    return this.state.readInbox(chainId, topic, afterSeq);
  }
  armTimer(executionId: string, callId: string, wakeAtMs: number): void {
    this.state.armTimer(executionId, callId, wakeAtMs);
  }
  disarmTimer(executionId: string, callId: string): void {
    this.state.disarmTimer(executionId, callId);
  }
}
