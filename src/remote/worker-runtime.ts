/**
 * The WorkerRuntime SPI (ADR 0020 K8.5): the seam an orchestrator places executions across.
 *
 * Invariants (tests cite S1..S4):
 * S1. `dispatch` is idempotent by execution id: a second dispatch of the same id, flow and input
 *     attaches to the existing execution (W5) and never runs it twice.
 * S2. `dispatch` resolves with the outcome the execution's log says it ended with (its chain
 *     head's, when it continued); it never resolves from a message alone.
 * S3. `cancel` is best effort: it aborts the worker's in-flight work when it is delivered, and
 *     what settles the execution is the durable EXECUTION_CANCELLED fact.
 * S4. Requests are checked here before they reach a runtime or a wire: a malformed one is an
 *     InvalidInputError (or InvalidIdError) and changes nothing. That includes an input or a
 *     reason nested more than MAX_JSON_DEPTH deep (json-depth.ts J2).
 * S5. `dispatch` calls `onAccepted` once the execution's start is durable (a worker server's 202),
 *     before it settles; a dispatcher applies a cancel that waited for the start then (D5).
 * S6. A continued execution whose chain head routing cannot reach (ChainHopLimitError, or a
 *     successor missing or failing verification) settles as `failed` with a
 *     LOOM_CHAIN_HOP_LIMIT error naming the furthest verified generation: never `continued`,
 *     never `completed`, never a rejection (ADR 0109 fix round 3 (3)).
 */
import { InvalidInputError } from "../kernel/errors.ts";
import { assertValidId } from "../kernel/ids.ts";
import { canonicalJson, isPlainObject, toJson, type Json } from "../kernel/json.ts";
import type { Outcome } from "../runtime/outcome.ts";
import { assertValueDepth } from "./json-depth.ts";

/** What an ended execution came to, as its log says (the runtime's `Outcome`). */
export type ExecutionOutcome = Outcome;

export interface DispatchRequest {
  executionId: string;
  /** The name of a flow the worker has registered. */
  flow: string;
  input?: Json;
}

export interface CancelRequest {
  executionId: string;
  /** Why; recorded in EXECUTION_CANCELLED (text as is, any other JSON as its JSON text). */
  reason?: Json;
}

export interface DispatchOptions {
  /** Called once the start is durable, before the outcome settles (S5). */
  onAccepted?: () => void;
}

/**
 * Where executions run. `LocalWorkerRuntime` runs them on a runtime in this process,
 * `RemoteWorkerRuntime` on an HTTP worker server; a `Dispatcher` places them across several.
 */
export interface WorkerRuntime {
  /** Starts (or attaches to, S1) the execution and resolves with its outcome (S2, S5). */
  dispatch(request: DispatchRequest, options?: DispatchOptions): Promise<ExecutionOutcome>;
  /** Aborts the execution's in-flight work on this worker, best effort (S3). */
  cancel?(executionId: string, reason?: Json): Promise<void>;
}

/** The longest flow name a request may carry. */
const MAX_FLOW_NAME = 200;

/** S4: a dispatch request, checked and copied (its input normalised to JSON). */
export function checkedDispatch(value: unknown): DispatchRequest {
  const o = requestObject(value, "a dispatch request", ["executionId", "flow", "input"]);
  if (typeof o.flow !== "string" || o.flow === "" || o.flow.length > MAX_FLOW_NAME) {
    throw new InvalidInputError(
      `a dispatch request needs "flow", a flow name of 1 to ${MAX_FLOW_NAME} characters`,
    );
  }
  const request: DispatchRequest = { executionId: o.executionId, flow: o.flow };
  const input = checkedJson(o.input, "the input of a dispatch request");
  if (input !== undefined) request.input = input;
  return request;
}

/** S4: a cancel request, checked and copied. */
export function checkedCancel(value: unknown): CancelRequest {
  const o = requestObject(value, "a cancel request", ["executionId", "reason"]);
  const request: CancelRequest = { executionId: o.executionId };
  const reason = checkedJson(o.reason, "the reason of a cancel request");
  if (reason !== undefined) request.reason = reason;
  return request;
}

/**
 * The text `Runtime.cancel` records for a reason: a string as it is, any other JSON value as its
 * canonical JSON text (the runtime checks the length).
 */
export function reasonText(reason: Json | undefined): string | undefined {
  if (reason === undefined || typeof reason === "string") return reason;
  return canonicalJson(reason);
}

/**
 * `toJson` of a value known not to nest too deep (S4), said in the seam's words. `toJson` bounds
 * the depth itself too, of what a `toJSON` returns as well (kernel/json.ts MAX_DEPTH).
 */
function checkedJson(value: unknown, what: string): Json | undefined {
  assertValueDepth(value, what);
  return toJson(value, what);
}

function requestObject(
  value: unknown,
  what: string,
  keys: readonly string[],
): { [key: string]: unknown; executionId: string } {
  if (!isPlainObject(value)) throw new InvalidInputError(`${what} must be a JSON object`);
  for (const key of Object.keys(value)) {
    if (!keys.includes(key)) {
      throw new InvalidInputError(
        `${what} has an unknown field ${JSON.stringify(key)} (fields: ${keys.join(", ")})`,
      );
    }
  }
  const id: unknown = value.executionId;
  if (id === undefined) throw new InvalidInputError(`${what} needs "executionId"`);
  assertValidId(id);
  return { ...value, executionId: id };
}
