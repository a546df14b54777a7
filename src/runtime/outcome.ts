/**
 * What an ended execution came to: the answer of `handle.result()`. `outcomeOf` names every
 * status (kernel/events.ts E5).
 */
import { InvariantViolation, type ErrorData } from "../kernel/errors.ts";
import type { TerminalStatus } from "../kernel/events.ts";
import { assertNever } from "../kernel/never.ts";
import type { ExecutionState } from "../fold/state.ts";

/** `O` is the flow's output type (`unknown` for an execution started by name). */
export interface Outcome<O = unknown> {
  status: TerminalStatus;
  output?: O;
  error?: ErrorData;
  continuedTo?: string;
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
      return state._continuedTo === undefined
        ? { status: "continued" }
        : { status: "continued", continuedTo: state._continuedTo };
    case "queued":
    case "pending":
    case "running":
    case "parked":
      throw new InvariantViolation(
        `execution "${state.executionId}" has not ended (${state.status})`,
      );
    default:
      return assertNever(state.status, "status");
  }
}
