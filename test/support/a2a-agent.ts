/**
 * A local A2A agent for the A2A effect tests: `@a2a-js/sdk`'s own server (DefaultRequestHandler,
 * InMemoryTaskStore, JSON-RPC over express) on 127.0.0.1, with an executor whose behaviour the
 * message text picks:
 *
 * - `slow ...` works for 30 s in 20 ms sleeps and honours `cancelTask`: the cancel marks the task,
 *   publishes its final `canceled` status, and the loop stops at its next check;
 * - `late ...` does the same, but only makes its task known (its first event) after 300 ms;
 * - `hold ...` works until `release()` (or its cancel), then echoes its text like anything else;
 * - `fail ...` ends the task `failed`, with a status message saying why;
 * - `ask ...` stops at `input-required` with a question; a reply on that task completes it;
 * - anything else is echoed back as an artifact sent in three chunks, then `completed`.
 *
 * It records what it saw: the JSON-RPC methods called, every task started (with the message that
 * started it), every `cancelTask` call, and each task's final state.
 */
import type { Server } from "node:http";
import express from "express";
import {
  A2A_PROTOCOL_VERSION,
  AGENT_CARD_PATH,
  Role,
  TaskState,
  type AgentCard,
  type Message,
  type Part,
} from "@a2a-js/sdk";
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";

export interface AgentTask {
  taskId: string;
  contextId: string;
  /** The text of the message that started (or continued) the task. */
  text: string;
  messageId: string;
  metadata: Record<string, unknown> | undefined;
  startedAtMs: number;
  finalState?: TaskState;
}

export interface AgentCancel {
  taskId: string;
  atMs: number;
}

export interface A2AAgent {
  /** The agent's base URL; its card is at `/.well-known/agent-card.json`. */
  url: string;
  /** The JSON-RPC method of every request, in order. */
  methods: string[];
  tasks: AgentTask[];
  cancels: AgentCancel[];
  /** Lets every `hold ...` task, running or yet to start, finish (echo and complete). */
  release(): void;
  /** Cuts every open connection (a stream midway, say); the agent goes on serving new ones. */
  dropConnections(): void;
  close(): Promise<void>;
}

const SLOW_MS = 30_000;
const LATE_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const textPart = (value: string): Part => ({
  content: { $case: "text", value },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});

function agentMessage(taskId: string, contextId: string, text: string): Message {
  return {
    messageId: `${taskId}-status`,
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function textOf(message: Message): string {
  return message.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
}

class TestExecutor implements AgentExecutor {
  readonly tasks: AgentTask[] = [];
  readonly cancels: AgentCancel[] = [];
  private readonly cancelled = new Set<string>();
  private readonly contexts = new Map<string, string>();
  private closed = false;
  private released = false;

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    this.cancels.push({ taskId, atMs: performance.now() });
    this.cancelled.add(taskId);
    this.status(bus, taskId, this.contexts.get(taskId) ?? "", TaskState.TASK_STATE_CANCELED, "ok");
  };

  async execute(rc: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId } = rc;
    const message = rc.userMessage;
    const text = textOf(message);
    this.contexts.set(taskId, contextId);
    this.tasks.push({
      taskId,
      contextId,
      text,
      messageId: message.messageId,
      metadata: message.metadata,
      startedAtMs: performance.now(),
    });
    const continuing = rc.task !== undefined;
    if (text.startsWith("late")) await sleep(LATE_MS);
    // Every stream starts with the task, a continued one too.
    bus.publish(
      AgentEvent.task(
        rc.task ?? {
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
          artifacts: [],
          history: [message],
          metadata: undefined,
        },
      ),
    );
    this.status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING);
    if (continuing) return this.echo(bus, taskId, contextId, `answer: ${text}`);
    if (text.startsWith("slow") || text.startsWith("late"))
      return this.slow(bus, taskId, contextId);
    if (text.startsWith("hold")) {
      if (!(await this.held(taskId))) return;
      return this.echo(bus, taskId, contextId, `echo: ${text}`);
    }
    if (text.startsWith("fail")) {
      return this.status(bus, taskId, contextId, TaskState.TASK_STATE_FAILED, `refused: ${text}`);
    }
    if (text.startsWith("ask")) {
      return this.status(bus, taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, "which one?");
    }
    return this.echo(bus, taskId, contextId, `echo: ${text}`);
  }

  /** Stops every slow loop still running (the server is closing). */
  close(): void {
    this.closed = true;
  }

  release(): void {
    this.released = true;
  }

  /** Waits for `release()`: true then, false if the task was cancelled or the server closes. */
  private async held(taskId: string): Promise<boolean> {
    for (;;) {
      if (this.cancelled.has(taskId) || this.closed) return false;
      if (this.released) return true;
      await sleep(20);
    }
  }

  private async slow(bus: ExecutionEventBus, taskId: string, contextId: string): Promise<void> {
    const giveUp = performance.now() + SLOW_MS;
    while (performance.now() < giveUp) {
      // cancelTask published the final status already: publishing anything more would be wrong.
      if (this.cancelled.has(taskId) || this.closed) return;
      await sleep(20);
    }
    this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED);
  }

  private async echo(bus: ExecutionEventBus, taskId: string, contextId: string, text: string) {
    const third = Math.ceil(text.length / 3);
    const chunks = [text.slice(0, third), text.slice(third, 2 * third), text.slice(2 * third)];
    for (const [i, chunk] of chunks.entries()) {
      await sleep(5);
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact: {
            artifactId: "echo",
            name: "echo",
            description: "",
            parts: [textPart(chunk)],
            metadata: undefined,
            extensions: [],
          },
          append: i > 0,
          lastChunk: i === chunks.length - 1,
          metadata: undefined,
        }),
      );
    }
    this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED);
  }

  private status(
    bus: ExecutionEventBus,
    taskId: string,
    contextId: string,
    state: TaskState,
    text?: string,
  ): void {
    const message = text === undefined ? undefined : agentMessage(taskId, contextId, text);
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        status: { state, message, timestamp: now() },
        metadata: undefined,
      }),
    );
    if (state !== TaskState.TASK_STATE_WORKING) {
      for (const t of this.tasks) if (t.taskId === taskId) t.finalState = state;
    }
  }
}

const now = () => new Date().toISOString();

function card(url: string, streaming: boolean): AgentCard {
  return {
    name: "loom-test-agent",
    description: "Echoes, works slowly, fails or asks, as the message says.",
    supportedInterfaces: [
      { url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: A2A_PROTOCOL_VERSION },
    ],
    provider: undefined,
    version: "1",
    capabilities: { streaming, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [],
    signatures: [],
  };
}

async function everyTaskEnded(executor: TestExecutor): Promise<void> {
  const giveUp = performance.now() + 30_000;
  while (executor.tasks.some((t) => t.finalState === undefined) && performance.now() < giveUp) {
    await sleep(10);
  }
  await sleep(50); // the task store records the final status the executor published
}

/** Starts the agent on 127.0.0.1 at a free port; its card advertises streaming unless told. */
export async function startA2AAgent(
  opts: { streaming?: boolean; endBeforeSubscribe?: boolean } = {},
): Promise<A2AAgent> {
  const executor = new TestExecutor();
  const methods: string[] = [];
  const app = express();
  app.post("/", express.json(), (req, _res, next) => {
    const method: unknown = (req.body as { method?: unknown } | undefined)?.method;
    methods.push(typeof method === "string" ? method : "?");
    if (opts.endBeforeSubscribe && typeof method === "string" && /subscribe/i.test(method)) {
      // The race a follower meets: every task ends after it was read and before the
      // subscription arrives, which the agent then refuses (the task is terminal).
      executor.release();
      void everyTaskEnded(executor).then(() => next());
      return;
    }
    next();
  });
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const url = `http://127.0.0.1:${port}`;
  // The card names the JSON-RPC endpoint, so it is made once the port is known.
  const handler = new DefaultRequestHandler(
    card(`${url}/`, opts.streaming ?? true),
    new InMemoryTaskStore(),
    executor,
  );
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
  app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  return {
    url,
    methods,
    tasks: executor.tasks,
    cancels: executor.cancels,
    release: () => executor.release(),
    dropConnections: () => server.closeAllConnections(),
    close: async () => {
      executor.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
