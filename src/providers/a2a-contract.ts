/**
 * What an A2A call (a2a.ts) takes, returns and throws: its input, its result with the task's
 * state, and the typed errors of a task that failed, was cancelled by the agent, or ran past the
 * effect's `timeoutMs`. The errors are registered, so one read back from a log is itself again.
 */
import { defineError, registerErrorClass } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";

/** The remote task ended `failed` or `rejected`. */
export class A2ATaskFailedError extends defineError("LOOM_A2A_TASK_FAILED") {}
registerErrorClass(A2ATaskFailedError.code, A2ATaskFailedError);

/** The remote task ended `canceled`, and not because this effect asked. */
export class A2ATaskCanceledError extends defineError("LOOM_A2A_TASK_CANCELED") {}
registerErrorClass(A2ATaskCanceledError.code, A2ATaskCanceledError);

/** The task did not end within the effect's `timeoutMs` (not a cancel); it was cancelled. */
export class A2ATimeoutError extends defineError("LOOM_A2A_TIMEOUT") {}
registerErrorClass(A2ATimeoutError.code, A2ATimeoutError);

export interface A2AInput {
  text: string;
  /** Continues a conversation: the `contextId` of an earlier result. */
  contextId?: string;
  /** Answers a task that stopped at `input-required` or `auth-required`. */
  taskId?: string;
}

export type A2ATaskState =
  | "unspecified"
  | "submitted"
  | "working"
  | "completed"
  | "failed"
  | "canceled"
  | "input-required"
  | "rejected"
  | "auth-required";

export interface A2AResult {
  /** The remote task's id; absent when the agent answered with a message alone. */
  taskId?: string;
  contextId: string;
  state: A2ATaskState;
  /** The artifacts' text parts, or, with no artifact text, the agent's last message's. */
  text: string;
  /** The task's artifacts, in A2A's JSON form (`{ artifactId, name, parts: [{ text }] }`). */
  artifacts: Json[];
}
