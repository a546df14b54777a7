/**
 * The dispatcher: places executions on workers and forwards cancels to them (ADR 0020 K8.5).
 *
 * Invariants (tests cite D1..D4):
 * D1. Placement is round robin over the workers not being skipped; a worker whose dispatch
 *     failed to be delivered (WorkerUnreachableError, WorkerRefusedError) is skipped for
 *     `skipMs` and the next one is tried. Any other error is the request's and is thrown.
 * D2. An execution dispatched again goes first to the worker it was placed on; a start being
 *     idempotent (S1), another worker attaches to it rather than running it twice.
 * D3. `cancel` makes the cancel durable first, through the orchestrator's own runtime (which
 *     fences the lease, then appends EXECUTION_CANCELLED: A6), and only then forwards it to the
 *     worker holding the execution.
 * D4. The forward is best effort (A7): its failure is reported in the result, never thrown. The
 *     durable fact settles the execution, and the worker's runtime sees the cancel notice on its
 *     next poll even when the forward never arrives.
 */
import type { Clock } from "../kernel/clock.ts";
import {
  InvalidInputError,
  NoWorkerAvailableError,
  ensureError,
  isLoomError,
} from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { Runtime } from "../runtime/runtime.ts";
import {
  checkedDispatch,
  reasonText,
  type DispatchRequest,
  type ExecutionOutcome,
  type WorkerRuntime,
} from "./worker-runtime.ts";

export interface DispatcherOptions {
  /** The orchestrator's runtime, on the store the workers share: cancels are made durable here. */
  runtime: Runtime;
  workers: readonly WorkerRuntime[];
  /** How long a worker that refused or was unreachable is skipped (default 30 s). */
  skipMs?: number;
  /** Measures the skip (default: the runtime's clock). */
  clock?: Clock;
  /** Told of each failed forward, besides the result saying so (default: the runtime's report). */
  onForwardError?: (error: Error, executionId: string) => void;
}

/** What `Dispatcher.cancel` did. */
export interface CancelResult {
  /** True when the orchestrator's cancel ended the execution, false when it had already ended. */
  cancelled: boolean;
  /** True when a worker holding the execution took the forwarded cancel. */
  forwarded: boolean;
  /** Why the forward failed, when it was tried and failed (D4). */
  forwardError?: Error;
}

const DELIVERY_ERRORS = ["LOOM_WORKER_UNREACHABLE", "LOOM_WORKER_REFUSED"];

export class Dispatcher {
  private readonly runtime: Runtime;
  private readonly workers: readonly WorkerRuntime[];
  private readonly skipMs: number;
  private readonly clock: Clock;
  private readonly onForwardError: (error: Error, executionId: string) => void;
  /** Worker -> the time until which it is skipped (D1). */
  private readonly skipUntil = new Map<WorkerRuntime, number>();
  /** Execution id -> the worker it was placed on, while any dispatch of it is outstanding. */
  private readonly placed = new Map<string, { worker: WorkerRuntime; pending: number }>();
  private next = 0;

  constructor(options: DispatcherOptions) {
    const workers: readonly WorkerRuntime[] = Array.isArray(options.workers) ? options.workers : [];
    if (workers.length === 0) {
      throw new InvalidInputError("a Dispatcher needs at least one worker");
    }
    const skipMs = options.skipMs ?? 30_000;
    if (!Number.isFinite(skipMs) || skipMs < 0) {
      throw new InvalidInputError(`skipMs must be a finite number >= 0, got ${skipMs}`);
    }
    this.runtime = options.runtime;
    this.workers = [...workers];
    this.skipMs = skipMs;
    this.clock = options.clock ?? options.runtime.clock;
    this.onForwardError = options.onForwardError ?? ((e: Error) => this.runtime.report(e));
  }

  /**
   * Places the execution on a worker (D1, D2) and resolves with its outcome as the log settles
   * it. NoWorkerAvailableError when every worker refused it or was unreachable.
   */
  async dispatch(request: DispatchRequest): Promise<ExecutionOutcome> {
    const checked = checkedDispatch(request);
    const id = checked.executionId;
    const failures: string[] = [];
    for (const worker of this.candidates(id)) {
      const place = this.placed.get(id) ?? { worker, pending: 0 };
      place.worker = worker;
      place.pending++;
      this.placed.set(id, place);
      try {
        const outcome = await worker.dispatch(checked);
        this.skipUntil.delete(worker);
        return outcome;
      } catch (e) {
        if (!DELIVERY_ERRORS.some((code) => isLoomError(e, code))) throw e;
        this.skipUntil.set(worker, this.clock.now() + this.skipMs);
        failures.push(ensureError(e).message);
      } finally {
        if (--place.pending === 0) this.placed.delete(id);
      }
    }
    throw new NoWorkerAvailableError(`no worker took execution "${id}": ${failures.join("; ")}`, {
      executionId: id,
      failures,
    });
  }

  /** The worker execution `executionId` is placed on while a dispatch of it is outstanding. */
  placement(executionId: string): WorkerRuntime | undefined {
    return this.placed.get(executionId)?.worker;
  }

  /**
   * Cancels the execution: durably first, through the orchestrator's runtime (D3), then by a
   * forward to the worker holding it (D4: reported, not thrown). Refusals of the cancel itself
   * (an unknown id, a bad reason) are thrown before anything is written or forwarded.
   */
  async cancel(executionId: string, reason?: Json): Promise<CancelResult> {
    const cancelled = await this.runtime.cancel(executionId, reasonText(reason));
    // Forwarded even when it had already ended: a worker may still run a step of it.
    const worker = this.placed.get(executionId)?.worker;
    if (!worker?.cancel) return { cancelled, forwarded: false };
    try {
      await worker.cancel(executionId, reason);
      return { cancelled, forwarded: true };
    } catch (e) {
      const error = ensureError(e);
      this.onForwardError(error, executionId);
      return { cancelled, forwarded: false, forwardError: error };
    }
  }

  /**
   * The workers to try, in order (D1, D2): the one the execution is placed on, then the others
   * not being skipped, round robin, then the skipped ones (the soonest back first), so a fleet
   * that is all skipped is still tried rather than refused outright.
   */
  private candidates(executionId: string): WorkerRuntime[] {
    const now = this.clock.now();
    const skipped = (w: WorkerRuntime) => (this.skipUntil.get(w) ?? 0) > now;
    const ready = this.workers.filter((w) => !skipped(w));
    const start = ready.length === 0 ? 0 : this.next++ % ready.length;
    const order = [
      ...ready.slice(start),
      ...ready.slice(0, start),
      ...this.workers
        .filter(skipped)
        .sort((a, b) => (this.skipUntil.get(a) ?? 0) - (this.skipUntil.get(b) ?? 0)),
    ];
    const placed = this.placed.get(executionId)?.worker;
    return placed ? [placed, ...order.filter((w) => w !== placed)] : order;
  }
}
