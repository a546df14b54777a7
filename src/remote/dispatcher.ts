/**
 * The dispatcher: places executions on workers and forwards cancels to them (ADR 0020 K8.5).
 *
 * Invariants (tests cite D1..D7):
 * D1. Placement is round robin over the workers not being skipped; a worker whose dispatch failed
 *     to be delivered (WorkerUnreachableError, WorkerRefusedError) and whose start the log does
 *     not show (D6) is skipped for `skipMs` and the next one is tried. Any other error is the
 *     request's and is thrown, a WorkerFailedError (the worker's 500) included: the worker is up
 *     and stays in rotation, and another worker would fail the request too.
 * D2. An execution dispatched again goes first to the worker it was placed on; a start being
 *     idempotent (S1), another worker attaches to it rather than running it twice.
 * D3. `cancel` makes the cancel durable first, through the orchestrator's own runtime (which
 *     fences the lease, then appends EXECUTION_CANCELLED: A6), and only then forwards it to the
 *     worker holding the execution.
 * D4. The forward is best effort (A7): its failure is reported in the result, never thrown. The
 *     durable fact settles the execution, and the worker's runtime sees the cancel notice on its
 *     next poll even when the forward never arrives.
 * D5. A cancel of an execution whose dispatch is in flight but whose start is not durable yet is
 *     not lost: it waits for the start (the worker's 202, or the log, read every so often), then
 *     goes on as D3. Only when every dispatch of it ended without a start does it fail, with the
 *     ExecutionNotFoundError the runtime gave.
 * D6. A delivery failure is not taken for a refusal before the log is read: a worker that gave
 *     no answer in time may have made the start durable. When the log holds the same start (flow
 *     and input), the dispatch settles from the log and the worker is not skipped; when it holds
 *     another one, the dispatch fails with ExecutionConflictError.
 * D7. A worker is taken back into rotation as soon as it accepts a start (its 202), not only
 *     when a dispatch settles.
 */
import type { Clock } from "../kernel/clock.ts";
import {
  InvalidInputError,
  NoWorkerAvailableError,
  ensureError,
  isLoomError,
} from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { assertSameStart } from "../runtime/runtime-support.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { settledOutcome } from "./settle.ts";
import {
  checkedCancel,
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
/** How often a cancel waiting for a start reads the log (D5), doubling up to the most. */
const FIRST_START_POLL_MS = 20;
const MAX_START_POLL_MS = 250;

/** Where an execution is placed while dispatches of it are outstanding. */
interface Placement {
  /** The worker its latest dispatch went to (undefined only before the first is tried). */
  worker: WorkerRuntime | undefined;
  pending: number;
  /** Settles true once its start is known durable, false when its dispatches all ended first. */
  started: Latch;
}

export class Dispatcher {
  private readonly runtime: Runtime;
  private readonly workers: readonly WorkerRuntime[];
  private readonly skipMs: number;
  private readonly clock: Clock;
  private readonly onForwardError: (error: Error, executionId: string) => void;
  /** Worker -> the time until which it is skipped (D1). */
  private readonly skipUntil = new Map<WorkerRuntime, number>();
  /** Execution id -> where it is placed, while any dispatch of it is outstanding. */
  private readonly placed = new Map<string, Placement>();
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
   * it. NoWorkerAvailableError when every worker refused it or was unreachable and the log shows
   * no start of it (D6).
   */
  async dispatch(request: DispatchRequest): Promise<ExecutionOutcome> {
    const checked = checkedDispatch(request);
    const id = checked.executionId;
    let place = this.placed.get(id);
    if (!place) {
      place = { worker: undefined, pending: 0, started: new Latch() };
      this.placed.set(id, place);
    }
    place.pending++;
    try {
      return await this.placeOn(place, checked);
    } finally {
      if (--place.pending === 0) {
        this.placed.delete(id);
        place.started.settle(false);
      }
    }
  }

  /** The worker execution `executionId` is placed on while a dispatch of it is outstanding. */
  placement(executionId: string): WorkerRuntime | undefined {
    return this.placed.get(executionId)?.worker;
  }

  /** The workers being skipped now (D1), the soonest back first. */
  skipped(): WorkerRuntime[] {
    const now = this.clock.now();
    return this.workers
      .filter((w) => (this.skipUntil.get(w) ?? 0) > now)
      .sort((a, b) => (this.skipUntil.get(a) ?? 0) - (this.skipUntil.get(b) ?? 0));
  }

  /**
   * Cancels the execution: durably first, through the orchestrator's runtime (D3), then by a
   * forward to the worker holding it (D4: reported, not thrown). A cancel of an execution whose
   * dispatch is in flight waits for its start (D5). Refusals of the cancel itself (an unknown
   * id, a bad reason) are thrown before anything is written or forwarded.
   */
  async cancel(executionId: string, reason?: Json): Promise<CancelResult> {
    const request = checkedCancel(reason === undefined ? { executionId } : { executionId, reason });
    const why = reasonText(request.reason);
    const before = this.placed.get(executionId);
    let cancelled: boolean;
    try {
      cancelled = await this.runtime.cancel(executionId, why);
    } catch (e) {
      const place = this.placed.get(executionId);
      if (!isLoomError(e, "LOOM_NOT_FOUND") || !place) throw e;
      cancelled = await this.cancelWhenStarted(place, executionId, why);
    }
    // Forwarded even when it had already ended: a worker may still run a step of it. Its
    // dispatch may have settled (and its placement gone) since the cancel was made durable.
    const worker = (this.placed.get(executionId) ?? before)?.worker;
    if (!worker?.cancel) return { cancelled, forwarded: false };
    try {
      await worker.cancel(executionId, request.reason);
      return { cancelled, forwarded: true };
    } catch (e) {
      const error = ensureError(e);
      this.onForwardError(error, executionId);
      return { cancelled, forwarded: false, forwardError: error };
    }
  }

  /** Tries the workers in turn (D1, D2, D6, D7) until one takes the execution. */
  private async placeOn(place: Placement, request: DispatchRequest): Promise<ExecutionOutcome> {
    const id = request.executionId;
    const failures: string[] = [];
    for (const worker of this.candidates(id)) {
      place.worker = worker;
      const accepted = () => {
        this.skipUntil.delete(worker);
        place.started.settle(true);
      };
      try {
        const outcome = await worker.dispatch(request, { onAccepted: accepted });
        accepted();
        return outcome;
      } catch (e) {
        if (!DELIVERY_ERRORS.some((code) => isLoomError(e, code))) throw e;
        if (await this.startOnLog(request)) {
          accepted();
          return settledOutcome(this.runtime, id);
        }
        this.skipUntil.set(worker, this.clock.now() + this.skipMs);
        failures.push(ensureError(e).message);
      }
    }
    throw new NoWorkerAvailableError(`no worker took execution "${id}": ${failures.join("; ")}`, {
      executionId: id,
      failures,
    });
  }

  /**
   * D6: whether the log holds this start (the same flow and input); ExecutionConflictError when
   * it holds another.
   */
  private async startOnLog(request: DispatchRequest): Promise<boolean> {
    const id = request.executionId;
    let state: { flow: string; input?: Json };
    try {
      state = await this.runtime.getState(id);
    } catch (e) {
      if (isLoomError(e, "LOOM_NOT_FOUND")) return false;
      throw e;
    }
    assertSameStart(id, request.flow, request.input, state.flow, state.input);
    return true;
  }

  /**
   * D5: the orchestrator's cancel, once the start of the placed execution is durable. Its
   * dispatch says so at once (onAccepted); the log is read every so often as well, for a
   * WorkerRuntime that does not say, or a 202 that is late. When every dispatch of it ended
   * without a start, one last try, and the ExecutionNotFoundError is the caller's.
   */
  private async cancelWhenStarted(place: Placement, id: string, why?: string): Promise<boolean> {
    const started = place.started.wait();
    for (let pauseMs = FIRST_START_POLL_MS; ; pauseMs = Math.min(pauseMs * 2, MAX_START_POLL_MS)) {
      const signalled = await within(started, pauseMs);
      try {
        return await this.runtime.cancel(id, why);
      } catch (e) {
        if (!isLoomError(e, "LOOM_NOT_FOUND") || signalled !== undefined) throw e;
      }
    }
  }

  /**
   * The workers to try, in order (D1, D2): the one the execution is placed on, then the others
   * not being skipped, round robin, then the skipped ones (the soonest back first), so a fleet
   * that is all skipped is still tried rather than refused outright.
   */
  private candidates(executionId: string): WorkerRuntime[] {
    const skipped = this.skipped();
    const ready = this.workers.filter((w) => !skipped.includes(w));
    const start = ready.length === 0 ? 0 : this.next++ % ready.length;
    const order = [...ready.slice(start), ...ready.slice(0, start), ...skipped];
    const place = this.placed.get(executionId);
    const placed = place && place.pending > 1 ? place.worker : undefined;
    return placed ? [placed, ...order.filter((w) => w !== placed)] : order;
  }
}

/** A one-time boolean that can be awaited. */
class Latch {
  private value: boolean | undefined;
  private readonly waiters: ((value: boolean) => void)[] = [];

  settle(value: boolean): void {
    if (this.value !== undefined) return;
    this.value = value;
    for (const waiter of this.waiters.splice(0)) waiter(value);
  }

  wait(): Promise<boolean> {
    const value = this.value;
    if (value !== undefined) return Promise.resolve(value);
    return new Promise<boolean>((resolve) => this.waiters.push(resolve));
  }
}

/** What `promise` resolves with, or undefined when `ms` pass first (the timer is cleared). */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const elapsed = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, elapsed]);
  } finally {
    clearTimeout(timer);
  }
}
