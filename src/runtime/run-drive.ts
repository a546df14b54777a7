/**
 * What lives for one drive of a run (tracing.ts: from a start, a re-run or a wake until the run
 * parks, ends or stops): the drive's span, the heartbeat that renews the run's lease, and the
 * timer of its deadline (deadline.ts). A Run (run.ts) owns one, starts it each time it becomes
 * active, and stops its timers and closes its span when it parks, stops or ends.
 *
 * Invariants (T2 as tracing.ts numbers it; D1..D3 this module's):
 * T2. One span per drive: `start` ends a span still open before it opens the next.
 * D1. At most one heartbeat and one deadline timer per run: `start` stops what runs first.
 * D2. The heartbeat renews every third of the lease's TTL (at least every 10 ms), unref'd: a
 *     lease is no reason to keep the process alive. The deadline timer is not (deadline.ts).
 * D3. The deadline is the execution's `startedAt` plus its budget, both from the state (K8.3),
 *     not this drive's start; deadline.ts measures what remains on the runtime clock.
 */
import type { Clock } from "../kernel/clock.ts";
import type { ExecutionState } from "../fold/state.ts";
import { armDeadline } from "./deadline.ts";
import type { DriveSpan, DriveStart, Tracing } from "./tracing.ts";

/** What a drive needs of the runtime (RunHost has it, for R a Run). */
export interface DriveHost<R> {
  readonly clock: Clock;
  readonly leaseTtlMs: number;
  /** Opens the span of each drive (tracing.ts). */
  readonly tracing: Tracing;
  /** Extends the run's lease by its TTL. */
  renew(run: R): void;
}

export class RunDrive<R extends { readonly state: ExecutionState }> {
  /** The span of this drive, while it records (tracing.ts): steps start theirs under it. */
  trace: DriveSpan | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private disarmDeadline: (() => void) | undefined;

  constructor(
    private readonly run: R,
    private readonly host: DriveHost<R>,
    /** The deadline passed (Run.deadlineExceeded). */
    private readonly exceeded: () => void,
  ) {}

  /** A drive begins: renew the lease while it lasts, watch the deadline (D1), open its span (T2). */
  start(how: DriveStart): void {
    this.stopTimers();
    const every = Math.max(10, Math.floor(this.host.leaseTtlMs / 3));
    this.heartbeat = setInterval(() => this.host.renew(this.run), every);
    this.heartbeat.unref();
    const state = this.run.state;
    const budget = state.deadlineMs;
    if (budget !== undefined) {
      const at = state.startedAt + budget;
      this.disarmDeadline = armDeadline(this.host.clock, at, budget, this.exceeded);
    }
    this.closeTrace();
    this.trace = this.host.tracing.drive(state, how);
  }

  /** K8.3 (D3): whether the execution is past its deadline; if so, `exceeded` is called. */
  pastDeadline(): boolean {
    const { deadlineMs, startedAt } = this.run.state;
    if (deadlineMs === undefined || this.host.clock.now() - startedAt < deadlineMs) return false;
    this.exceeded();
    return true;
  }

  stopTimers(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.disarmDeadline?.();
    this.disarmDeadline = undefined;
  }

  /**
   * Ends this drive's span: parked or ended as the state says, or stopped by `stop`; a step
   * still running is ended as cut short by `stop` or `cut` (its abort reason).
   */
  closeTrace(stop?: Error, cut?: Error): void {
    const trace = this.trace;
    if (trace === undefined) return;
    this.trace = undefined;
    trace.end(this.run.state, stop, cut);
  }
}
