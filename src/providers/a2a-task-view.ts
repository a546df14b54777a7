/**
 * What the agent said so far about one A2A call (a2a.ts), folded from its stream's events or its
 * polled tasks, and the step's result made from it.
 *
 * Invariants (a2a.ts 2, 4): the task's id is learned from the agent's first answer that names
 * it (`known` resolves then); the view is `done` once the task settles, or asks for input or
 * auth in a status newer than the one an answered task stood at; `completed`, `input-required`
 * and `auth-required` return, `failed` and `rejected` throw A2ATaskFailedError, and `canceled`
 * A2ATaskCanceledError.
 */
import type { Artifact, Message, Part, StreamResponse, Task } from "@a2a-js/sdk";
import type { Json } from "../kernel/json.ts";
import {
  A2ATaskCanceledError,
  A2ATaskFailedError,
  type A2AResult,
  type A2ATaskState,
} from "./a2a-contract.ts";
import type { A2ASdk } from "./a2a-sdk.ts";

const STATES: readonly A2ATaskState[] = [
  "unspecified",
  "submitted",
  "working",
  "completed",
  "failed",
  "canceled",
  "input-required",
  "rejected",
  "auth-required",
];
const SETTLED = new Set<A2ATaskState>(["completed", "failed", "canceled", "rejected"]);
const INTERRUPTED = new Set<A2ATaskState>(["input-required", "auth-required"]);

/** What the agent said so far about one call, folded from its events or polled tasks. */
export class TaskView {
  taskId: string | undefined;
  contextId = "";
  state: A2ATaskState = "unspecified";
  /** The message is on its way: the agent may have a task for it. */
  sent = false;
  /** The task's id is noted in the step's log (a2a-orphans.ts O1). */
  noted = false;
  readonly continuing: boolean;
  private message: Message | undefined;
  private readonly artifacts = new Map<string, Artifact>();
  private learned!: () => void;
  /** Resolves once the task's id is known. */
  readonly known = new Promise<void>((r) => (this.learned = r));
  /**
   * An answer to a task that asked for input is first met by that task as it stood: its old
   * status (the question) is not the agent's next one.
   */
  private stale: string | undefined;
  private statusKey = "";

  /** `taskId`: the task the message answers, if it does. */
  constructor(taskId: string | undefined) {
    this.continuing = taskId !== undefined;
    this.taskId = taskId;
    if (taskId !== undefined) this.learned();
  }

  /** Follows a task an earlier attempt of the step started (a2a-orphans.ts O4): its id is known. */
  follow(taskId: string): void {
    this.taskId = taskId;
    this.sent = true;
    this.learned();
  }

  /** The task ended, or asks for input: nothing more comes until the flow answers. */
  get done(): boolean {
    if (SETTLED.has(this.state)) return true;
    return INTERRUPTED.has(this.state) && this.statusKey !== this.stale;
  }

  see({ payload }: StreamResponse): void {
    if (!payload) return;
    const { value } = payload;
    if (payload.$case === "message") {
      this.message = payload.value;
      if (this.taskId === undefined) this.state = "completed";
    } else if (payload.$case === "task") {
      this.artifacts.clear();
      for (const a of payload.value.artifacts) this.artifacts.set(a.artifactId, a);
      this.status(payload.value.status);
    } else if (payload.$case === "statusUpdate") {
      this.status(payload.value.status);
    } else {
      const { artifact, append } = payload.value;
      const had = artifact && this.artifacts.get(artifact.artifactId);
      if (artifact && had && append) had.parts.push(...artifact.parts);
      else if (artifact) this.artifacts.set(artifact.artifactId, artifact);
    }
    this.contextId = value.contextId || this.contextId;
    const id = "id" in value ? value.id : "taskId" in value ? value.taskId : "";
    if (id && this.taskId === undefined) {
      this.taskId = id;
      this.learned();
    }
  }

  describe(): string {
    return `${this.taskId ?? "(none)"} in state ${this.state}`;
  }

  /** The step's result, or the typed error of a task that failed or was cancelled. */
  result(sdk: A2ASdk): A2AResult {
    const artifacts = [...this.artifacts.values()];
    const text =
      artifacts.map((a) => textOf(a.parts)).join("\n") || textOf(this.message?.parts ?? []);
    const out: A2AResult = {
      contextId: this.contextId,
      state: this.state,
      text,
      artifacts: artifacts.map((a) => sdk.core.Artifact.toJSON(a) as Json),
    };
    if (this.taskId !== undefined) out.taskId = this.taskId;
    const details = { taskId: this.taskId ?? null, contextId: this.contextId, state: this.state };
    if (this.state === "failed" || this.state === "rejected") {
      throw new A2ATaskFailedError(`A2A task ${this.describe()}: ${text}`, { ...details, text });
    }
    if (this.state === "canceled") {
      throw new A2ATaskCanceledError(`A2A task ${this.describe()}: ${text}`, { ...details, text });
    }
    return out;
  }

  private status(status: Task["status"]): void {
    if (!status) return;
    this.statusKey = JSON.stringify(status);
    if (this.continuing) this.stale ??= this.statusKey;
    this.state = STATES[status.state] ?? "unspecified";
    if (status.message) this.message = status.message;
  }
}

const textOf = (parts: Part[]) =>
  parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
