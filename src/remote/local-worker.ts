/**
 * A WorkerRuntime on a runtime in this process: what a worker server runs its requests on, and
 * what a dispatcher can place executions on without a network hop.
 */
import type { Json } from "../kernel/json.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { settledOutcome } from "./settle.ts";
import {
  checkedDispatch,
  reasonText,
  type DispatchOptions,
  type DispatchRequest,
  type ExecutionOutcome,
  type WorkerRuntime,
} from "./worker-runtime.ts";

export class LocalWorkerRuntime implements WorkerRuntime {
  constructor(readonly runtime: Runtime) {}

  /**
   * Starts the execution under its id, or attaches to it when the id exists with the same flow
   * and input (S1; `Runtime.start`'s W5: anything else is ExecutionConflictError). Resolves once
   * its start is durable, with its id; refusals are raised before anything is written.
   */
  async accept(request: DispatchRequest): Promise<string> {
    const checked = checkedDispatch(request);
    await this.runtime.start(checked.flow, checked.input, { id: checked.executionId });
    return checked.executionId;
  }

  /**
   * `accept` (then `onAccepted`, S5), then the outcome the log settles it with (S2), its chain
   * head's if it continued.
   */
  async dispatch(request: DispatchRequest, options?: DispatchOptions): Promise<ExecutionOutcome> {
    const id = await this.accept(request);
    options?.onAccepted?.();
    return this.outcome(id);
  }

  /** The outcome `executionId` settles with, as its log (or its chain head's) says. */
  outcome(executionId: string): Promise<ExecutionOutcome> {
    return settledOutcome(this.runtime, executionId);
  }

  /**
   * `Runtime.cancel`: aborts what this runtime runs of the execution at once and makes sure its
   * EXECUTION_CANCELLED fact exists (already there when the orchestrator cancelled first).
   */
  async cancel(executionId: string, reason?: Json): Promise<void> {
    await this.runtime.cancel(executionId, reasonText(reason));
  }
}
