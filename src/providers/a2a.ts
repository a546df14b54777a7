/**
 * `createA2AEffect({ url })`: a message to a remote agent over A2A (`@a2a-js/sdk` 1.x client,
 * protocol 1.0, JSON-RPC preferred) as a Loom effect. The step records only the final result.
 *
 * 1. One message per attempt, its `messageId` the step's idempotency key, so a retried or re-run
 *    attempt reaches the agent under the same id (its metadata says which attempt it is).
 * 2. The task's id is learned from the agent's first answer, not only at its end: with streaming
 *    (the card's `capabilities.streaming`, unless `stream: false`) the task's events are read
 *    from `sendMessageStream`; without, the message is sent with `returnImmediately` and the task
 *    is polled with `getTask`.
 * 3. Aborting a request does not stop the remote task (the agent keeps it running for
 *    resubscription). On a cancel or past `timeoutMs`, the effect calls `cancelTask` for the task,
 *    under its own `cancelTimeoutMs` (not the aborted signal), and waits for it; if the task's id
 *    is not known yet, it first waits, within the same bound, for the agent's first answer. Then it
 *    throws the signal's reason (a cancel, a step timeout) or `A2ATimeoutError`. A call that fails
 *    midway (a cut stream) cancels the task it started the same way before it throws, so that a
 *    retry does not leave two running; a task the flow was answering is left alone then.
 * 4. `completed` returns. `input-required` and `auth-required` return too, with that state: the
 *    flow decides, and answers with the result's `taskId`. `failed` and `rejected` throw
 *    `A2ATaskFailedError`; `canceled`, when the effect did not ask for it, `A2ATaskCanceledError`.
 * 5. A2A reports no token usage. Every request goes through `meteredFetch`, so what is metered is
 *    `netBytes` (and, by the metering middleware, `wallMs`).
 * 6. The SDK is an optional peer, loaded on first use: importing this module loads none of it,
 *    and creating the effect without it installed throws MissingDependencyError naming it.
 */
import type {
  AgentCard,
  Artifact,
  Message,
  Part,
  SendMessageRequest,
  StreamResponse,
  Task,
} from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { InvalidInputError, defineError, registerErrorClass } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { abortableDelay, raceAbort, reasonOf } from "../effects/delay.ts";
import { meteredFetch } from "../effects/fetch.ts";
import { checkedDuration } from "../kernel/limits.ts";
import type { Effect, EffectContext } from "../effects/effect.ts";
import { assertPeer, importPeer } from "../peers.ts";

const SDK = "@a2a-js/sdk";
const FEATURE = "loomwork/a2a";

/** The SDK's two modules, each imported once per process (peers.ts P2). */
const loadA2A = () =>
  Promise.all([
    importPeer<typeof import("@a2a-js/sdk")>(SDK, FEATURE),
    importPeer<typeof import("@a2a-js/sdk/client")>(`${SDK}/client`, FEATURE, SDK),
  ]).then(([core, client]) => ({ core, client }));
type A2ASdk = Awaited<ReturnType<typeof loadA2A>>;

/** The remote task ended `failed` or `rejected`. */
export class A2ATaskFailedError extends defineError("LOOM_A2A_TASK_FAILED") {}
registerErrorClass(A2ATaskFailedError.code, A2ATaskFailedError);

/** The remote task ended `canceled`, and not because this effect asked. */
export class A2ATaskCanceledError extends defineError("LOOM_A2A_TASK_CANCELED") {}
registerErrorClass(A2ATaskCanceledError.code, A2ATaskCanceledError);

/** The task did not end within the effect's `timeoutMs` (not a cancel); it was cancelled. */
export class A2ATimeoutError extends defineError("LOOM_A2A_TIMEOUT") {}
registerErrorClass(A2ATimeoutError.code, A2ATimeoutError);

export interface A2AEffectOptions {
  /** The agent's base URL: its card is read from `.well-known/agent-card.json` under it. */
  url: string;
  /** The step's name (default "a2a"). */
  name?: string;
  /** Read the task as a stream (default: if the card says so); an agent that cannot is polled. */
  stream?: boolean;
  /** How long one call may take, until the task ends or asks for input. */
  timeoutMs?: number;
  /** How often a task is polled when it is not streamed (default 250 ms). */
  pollIntervalMs?: number;
  /** How long a cancel may wait for the agent (default 3000 ms). */
  cancelTimeoutMs?: number;
}

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

export type A2AEffect = Effect<A2AInput, A2AResult> & { close(): Promise<void> };

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

export function createA2AEffect(options: A2AEffectOptions): A2AEffect {
  const { url } = options;
  if (typeof url !== "string" || !/^https?:\/\//.test(url) || !URL.canParse(url)) {
    throw new InvalidInputError(
      `createA2AEffect needs the agent's http(s) url, got ${JSON.stringify(url)}`,
    );
  }
  if (options.stream !== undefined && typeof options.stream !== "boolean") {
    throw new InvalidInputError("createA2AEffect: stream must be true or false");
  }
  const timeoutMs = optionalDuration(options.timeoutMs, "timeoutMs");
  const pollIntervalMs = optionalDuration(options.pollIntervalMs, "pollIntervalMs") ?? 250;
  const cancelTimeoutMs = optionalDuration(options.cancelTimeoutMs, "cancelTimeoutMs") ?? 3000;
  assertPeer(SDK, FEATURE);
  let card: AgentCard | undefined;

  /** One call: the message sent, then the task followed until it ends or asks for input. */
  async function exchange(
    sdk: A2ASdk,
    message: Message,
    view: TaskView,
    signal: AbortSignal,
    ectx: Metered,
  ) {
    const fetchImpl = fetchFor(signal, ectx);
    card ??= await new sdk.client.DefaultAgentCardResolver({ fetchImpl }).resolve(url);
    const client = await clientFor(sdk, card, fetchImpl);
    const streamed = options.stream !== false && card.capabilities?.streaming === true;
    const request = (returnImmediately: boolean): SendMessageRequest => ({
      tenant: "",
      message,
      configuration: {
        acceptedOutputModes: [],
        taskPushNotificationConfig: undefined,
        returnImmediately,
      },
      metadata: undefined,
    });
    view.sent = true;
    if (streamed) {
      for await (const event of client.sendMessageStream(request(false), { signal })) {
        view.see(event);
        if (view.done) return;
      }
      throw new Error(`the agent's stream ended with its task ${view.describe()}`);
    }
    const first = await client.sendMessage(request(true), { signal });
    view.see("messageId" in first ? message$(first) : task$(first));
    while (!view.done) {
      await abortableDelay(pollIntervalMs, signal);
      const id = view.taskId ?? "";
      view.see(task$(await client.getTask({ tenant: "", id, historyLength: 0 }, { signal })));
    }
  }

  return {
    name: options.name ?? "a2a",
    async run(input, ectx) {
      const sdk = await loadA2A();
      const message = userMessage(sdk, input, ectx);
      const view = new TaskView(message.taskId || undefined);
      // The SDK's requests stop on `local`, not on the step's signal: after a cancel, the task's
      // id may still have to be read from the agent's first answer.
      const local = new AbortController();
      const timer = new AbortController();
      const timeout =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              const details = { url, timeoutMs, ...(view.taskId ? { taskId: view.taskId } : {}) };
              timer.abort(new A2ATimeoutError(`A2A call ran past ${timeoutMs} ms`, details));
            }, timeoutMs);
      const stop = AbortSignal.any([ectx.signal, timer.signal]);
      const working = exchange(sdk, message, view, local.signal, ectx);
      try {
        await raceAbort(working, stop);
      } catch (e) {
        // A task this call started and will not follow any further is cancelled, lest a retry
        // run it twice; a task the flow answered is left alone unless the step itself stops.
        const stopped = stop.aborted;
        if (stopped || !view.continuing) await abandon(sdk, view, working, local, ectx);
        throw stopped ? reasonOf(stop) : e;
      } finally {
        clearTimeout(timeout);
        local.abort();
      }
      return view.result(sdk);
    },
    async close() {
      card = undefined;
    },
  };

  /** Stops the task the agent is running for this call, within `cancelTimeoutMs` in all. */
  async function abandon(
    sdk: A2ASdk,
    view: TaskView,
    working: Promise<void>,
    local: AbortController,
    ectx: EffectContext,
  ): Promise<void> {
    const deadline = AbortSignal.timeout(cancelTimeoutMs);
    if (view.taskId === undefined && view.sent) {
      await Promise.race([view.known, working.catch(() => undefined), aborted(deadline)]);
    }
    local.abort();
    if (view.taskId === undefined || view.done || card === undefined || deadline.aborted) return;
    try {
      const client = await clientFor(sdk, card, fetchFor(deadline, ectx));
      await client.cancelTask({ tenant: "", id: view.taskId, metadata: undefined });
    } catch {
      // Best effort: the task may have ended meanwhile (TaskNotCancelableError), or the agent
      // may not answer in time; the call is abandoned either way.
    }
  }
}

/** What the agent said so far about one call, folded from its events or polled tasks. */
class TaskView {
  taskId: string | undefined;
  contextId = "";
  state: A2ATaskState = "unspecified";
  /** The message is on its way: the agent may have a task for it. */
  sent = false;
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

function userMessage(sdk: A2ASdk, input: A2AInput, ectx: EffectContext): Message {
  const { text, contextId, taskId } = (input ?? {}) as Partial<A2AInput>;
  if (typeof text !== "string") throw new InvalidInputError("an A2A call needs { text: string }");
  for (const [k, v] of Object.entries({ contextId, taskId })) {
    if (v !== undefined && typeof v !== "string") {
      throw new InvalidInputError(`an A2A call's ${k} must be a string`);
    }
  }
  const part: Part = {
    content: { $case: "text", value: text },
    metadata: undefined,
    filename: "",
    mediaType: "text/plain",
  };
  return {
    messageId: ectx.idempotencyKey,
    contextId: contextId ?? "",
    taskId: taskId ?? "",
    role: sdk.core.Role.ROLE_USER,
    parts: [part],
    metadata: { loomAttempt: ectx.attempt },
    extensions: [],
    referenceTaskIds: [],
  };
}

type Metered = Pick<EffectContext, "meter">;

/** Every request of a call is metered (`netBytes`) and stops on `signal`. */
function fetchFor(signal: AbortSignal, ectx: Metered): typeof fetch {
  return meteredFetch({ signal, meter: (delta) => ectx.meter(delta) });
}

function clientFor(sdk: A2ASdk, card: AgentCard, fetchImpl: typeof fetch): Promise<Client> {
  const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } =
    sdk.client;
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [
      new JsonRpcTransportFactory({ fetchImpl }),
      new RestTransportFactory({ fetchImpl }),
    ],
    preferredTransports: ["JSONRPC"],
  });
  return new ClientFactory(options).createFromAgentCard(card);
}

const textOf = (parts: Part[]) =>
  parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const message$ = (value: Message): StreamResponse => ({ payload: { $case: "message", value } });
const task$ = (value: Task): StreamResponse => ({ payload: { $case: "task", value } });

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((r) => signal.addEventListener("abort", () => r(), { once: true }));
}

function optionalDuration(value: unknown, key: string): number | undefined {
  return value === undefined ? undefined : checkedDuration(value, `createA2AEffect ${key}`);
}
