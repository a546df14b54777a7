/** What an ended execution came to: the answer of `handle.result()`. */
import { InvariantViolation, type ErrorData } from "../kernel/errors.ts";
import type { ExecutionState } from "../fold/state.ts";

/** `O` is the flow's output type (`unknown` for an execution started by name). */
export interface Outcome<O = unknown> {
  status: "completed" | "failed" | "cancelled" | "continued";
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
    default:
      throw new InvariantViolation(
        `execution "${state.executionId}" has not ended (${state.status})`,
      );
  }
}
