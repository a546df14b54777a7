/**
 * The client of a worker server (worker-server.ts): a WorkerRuntime across HTTP.
 *
 * `dispatch` posts the request and then settles from the shared store's log (S2): the worker's
 * 202 only says the start is durable (S5: `onAccepted`). `cancel` posts /cancel and is best
 * effort (S3): what settles the execution is the EXECUTION_CANCELLED fact, which the
 * orchestrator writes first (see Dispatcher.cancel).
 */
import { InvalidInputError, RuntimeClosedError, WorkerRefusedError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { Runtime } from "../runtime/runtime.ts";
import type { Store } from "../store/spi.ts";
import { callWorker, checkedWorkerUrl, type WorkerTarget } from "./http-client.ts";
import { readerOf, settledOutcome, type OwnedReader } from "./settle.ts";
import { checkedAudience, checkedSecret } from "./signing.ts";
import {
  checkedCancel,
  checkedDispatch,
  type DispatchOptions,
  type DispatchRequest,
  type ExecutionOutcome,
  type WorkerRuntime,
} from "./worker-runtime.ts";

export interface RemoteWorkerOptions {
  /** The worker server's origin, e.g. `http://10.0.0.7:7070` (what `loom serve` prints). */
  url: string;
  /** The secret the server was started with. */
  secret: string;
  /**
   * The worker's id, which requests are signed for (signing.ts A5): what the server was started
   * with as its `workerId` (`loom serve --worker-id`); default: the origin of `url`.
   */
  workerId?: string;
  /** The certificate authority (PEM text) an `https:` worker's certificate must chain to. */
  ca?: string | Buffer;
  /** A runtime on the store the worker writes to, to read outcomes with (or `store`). */
  runtime?: Runtime;
  /**
   * The store the worker writes to, to read outcomes from (when no `runtime` is given), through
   * a runtime of its own that `close()` closes (the store stays open).
   */
  store?: Store;
  /** How long one request may take, connection to last byte of the answer (default 10 s). */
  timeoutMs?: number;
}

/** What `GET /health` answers. */
export interface WorkerHealth {
  ok: true;
  /** The owner id of the worker's runtime (the owner its leases name). */
  owner: string;
  /** Executions dispatched to it that have not settled. */
  active: number;
}

export class RemoteWorkerRuntime implements WorkerRuntime {
  /** The worker server's origin. */
  readonly url: string;
  private readonly target: WorkerTarget;
  private readonly reader: OwnedReader;
  private closed = false;

  constructor(options: RemoteWorkerOptions) {
    if (options === null || typeof options !== "object") {
      throw new InvalidInputError(
        "RemoteWorkerRuntime needs options { url, secret, runtime | store }",
      );
    }
    const url = checkedWorkerUrl(options.url);
    const timeoutMs = options.timeoutMs ?? 10_000;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new InvalidInputError(`timeoutMs must be a finite number > 0, got ${timeoutMs}`);
    }
    this.url = url.origin;
    const secret = checkedSecret(options.secret, `the remote worker ${this.url}`);
    this.reader = readerOf(options, `the remote worker ${this.url}`);
    const audience = checkedAudience(options.workerId ?? this.url, `the remote worker ${this.url}`);
    this.target = { url, secret, audience, timeoutMs };
    if (options.ca !== undefined) this.target.ca = options.ca;
  }

  /**
   * Posts the dispatch, then resolves with the outcome the log settles it with. Fails with
   * WorkerUnreachableError or WorkerRefusedError when the worker did not take it (its start may
   * still have become durable: see Dispatcher), WorkerFailedError when it failed on it, or with
   * the worker's refusal of the request (UnknownFlowError, ExecutionConflictError, ...).
   */
  async dispatch(request: DispatchRequest, options?: DispatchOptions): Promise<ExecutionOutcome> {
    const checked = checkedDispatch(request);
    this.assertOpen();
    const answer = await callWorker(this.target, "POST", "/dispatch", { ...checked });
    const id = (answer as { executionId?: unknown } | null)?.executionId;
    if (id !== checked.executionId) {
      throw new WorkerRefusedError(
        `worker ${this.url} answered a dispatch of "${checked.executionId}" with ${JSON.stringify(answer)}`,
        { url: this.url },
      );
    }
    options?.onAccepted?.();
    return settledOutcome(this.reader.reader, checked.executionId);
  }

  /** Asks the worker to abort the execution's in-flight work and make sure it is cancelled. */
  async cancel(executionId: string, reason?: Json): Promise<void> {
    const request = checkedCancel(reason === undefined ? { executionId } : { executionId, reason });
    this.assertOpen();
    await callWorker(this.target, "POST", "/cancel", { ...request });
  }

  /** The worker's `GET /health`. */
  async health(): Promise<WorkerHealth> {
    this.assertOpen();
    const answer = (await callWorker(this.target, "GET", "/health")) as Partial<WorkerHealth>;
    if (answer?.ok !== true || typeof answer.owner !== "string") {
      throw new WorkerRefusedError(
        `worker ${this.url} answered /health with ${JSON.stringify(answer)}`,
        { url: this.url },
      );
    }
    return { ok: true, owner: answer.owner, active: Number(answer.active ?? 0) };
  }

  /**
   * Closes the runtime it made to read outcomes from a `store` (a dispatch still settling fails
   * with RuntimeClosedError); a `runtime` it was given stays open. Later calls are refused.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.reader.close();
  }

  private assertOpen(): void {
    if (this.closed) throw new RuntimeClosedError(`the remote worker ${this.url} is closed`);
  }
}
