import { TaskState } from "@a2a-js/sdk";
import { afterEach, describe, expect, it } from "vitest";
import { flow$, InvalidInputError, isLoomError, memoryStore, type Envelope } from "../src/index.ts";
import {
  A2ATaskFailedError,
  A2ATimeoutError,
  createA2AEffect,
  type A2AEffect,
  type A2AEffectOptions,
  type A2AResult,
} from "../src/providers/a2a.ts";
import { startA2AAgent, type A2AAgent } from "./support/a2a-agent.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function agent(opts: { streaming?: boolean } = {}): Promise<A2AAgent> {
  const a = await startA2AAgent(opts);
  cleanup.push(() => a.close());
  return a;
}

function a2a(options: A2AEffectOptions): A2AEffect {
  const e = createA2AEffect(options);
  cleanup.push(() => e.close());
  return e;
}

const kinds = (log: Envelope[]) => log.map((e) => e.kind);
const payloadsOf = (log: Envelope[], kind: string) =>
  log.filter((e) => e.kind === kind).map((e) => e.payload as Record<string, unknown>);

describe("createA2AEffect: a remote agent over A2A (issue 6)", () => {
  it("calls the local agent streamed, polled, and as the card decides; the step records the final result", async () => {
    const streaming = await agent();
    const plain = await agent({ streaming: false });
    const cases = [
      { name: "streamed", agent: streaming, stream: true, methods: ["SendStreamingMessage"] },
      { name: "polled", agent: streaming, stream: false, methods: ["SendMessage", "GetTask"] },
      { name: "by-card", agent: streaming, stream: undefined, methods: ["SendStreamingMessage"] },
      { name: "no-stream", agent: plain, stream: true, methods: ["SendMessage", "GetTask"] },
    ];
    // a2a.ts 2: streamed when the card allows it and the caller did not say no; otherwise polled.
    for (const c of cases) {
      const before = c.agent.tasks.length;
      const methodsBefore = c.agent.methods.length;
      const echo = a2a({
        url: c.agent.url,
        ...(c.stream === undefined ? {} : { stream: c.stream }),
      });
      const f = flow$(`echo-${c.name}`, async (ctx) => ctx.execute(echo, { text: "tides" }));
      const r = rt(memoryStore()).registerFlow(f);
      const h = await r.start(f, null, { id: `echo-${c.name}` });
      const out = await h.result();
      const task = c.agent.tasks[before];
      expect(c.agent.tasks).toHaveLength(before + 1);
      expect(out.output, c.name).toEqual({
        taskId: task?.taskId,
        contextId: task?.contextId,
        state: "completed",
        text: "echo: tides",
        // The three chunks the agent streamed, appended to one artifact.
        artifacts: [
          {
            artifactId: "echo",
            name: "echo",
            parts: [
              { text: "echo", mediaType: "text/plain" },
              { text: ": ti", mediaType: "text/plain" },
              { text: "des", mediaType: "text/plain" },
            ],
          },
        ],
      });
      const methods = new Set(c.agent.methods.slice(methodsBefore));
      expect([...methods].sort(), c.name).toEqual([...c.methods].sort());
      // The step records the final result only, once.
      const log = await r.readLog(h.id);
      const completed = payloadsOf(log, "STEP_COMPLETED");
      expect(completed).toHaveLength(1);
      expect(completed[0]?.output).toEqual(out.output);
      // a2a.ts 5: no token usage, only what crossed the network, and the wall time.
      const metered = payloadsOf(log, "RESOURCE_METERED").map((p) => p.delta);
      expect(metered).toHaveLength(1);
      expect(Object.keys(metered[0] ?? {}).sort()).toEqual(["netBytes", "wallMs"]);
      expect((metered[0] as { netBytes: number }).netBytes).toBeGreaterThan(0);
      // a2a.ts 1: the message id is the step's idempotency key, and says its attempt.
      expect(task?.messageId).toBe(`${h.id}/${String(completed[0]?.callId)}`);
      expect(task?.metadata).toEqual({ loomAttempt: 1 });
    }
  });

  for (const stream of [true, false]) {
    for (const text of ["slow work", "late work"]) {
      it(`a cancel during a ${text.split(" ")[0]} ${stream ? "streamed" : "polled"} task reaches the agent as cancelTask; the task ends canceled`, async () => {
        const remote = await agent();
        const call = a2a({ url: remote.url, stream });
        const f = flow$("slow", async (ctx) => ctx.execute(call, { text }));
        const r = rt(memoryStore()).registerFlow(f);
        const h = await r.start(f, null, { id: `slow-${stream}-${text.split(" ")[0]}` });
        // The message reached the agent and its executor is running ("late": its task is not
        // known to the caller yet; a2a.ts 3: the effect waits for it before it cancels).
        await until(() => remote.tasks.length === 1, 10_000);
        const task = remote.tasks[0];
        expect(await h.cancel("enough")).toBe(true);
        await until(() => remote.cancels.length === 1, 2000);
        expect(remote.cancels[0]?.taskId).toBe(task?.taskId);
        await until(() => task?.finalState !== undefined, 2000);
        expect(task?.finalState).toBe(TaskState.TASK_STATE_CANCELED);
        const outcome = await h.result();
        expect(outcome.status).toBe("cancelled");
        expect(outcome.error?.code).toBe("LOOM_CANCELLED");
        const log = kinds(await r.readLog(h.id));
        expect(log).toContain("STEP_CANCELLED");
        expect(log.at(-1)).toBe("EXECUTION_CANCELLED");
        expect(log).not.toContain("STEP_COMPLETED");
        expect(remote.cancels).toHaveLength(1);
      });
    }
  }

  it("a stream cut midway: the task it started is cancelled before the error reaches the flow", async () => {
    const remote = await agent();
    const call = a2a({ url: remote.url });
    const f = flow$("cut", async (ctx) =>
      ctx.execute(call, { text: "slow, then cut" }, { retry: false }).then(
        () => "answered",
        (e: unknown) => (isLoomError(e) ? e.code : "error"),
      ),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null);
    await until(() => remote.tasks.length === 1, 10_000);
    // Time for the task's first event to reach the effect, which learns the task's id from it.
    await new Promise((resolve) => setTimeout(resolve, 500));
    remote.dropConnections();
    // a2a.ts 3: the cut call cancels the task it started before its error is recorded.
    const out = await h.result();
    expect(out.output).toBe("LOOM_APPLICATION");
    expect(remote.cancels.map((c) => c.taskId)).toEqual([remote.tasks[0]?.taskId]);
    expect(remote.tasks[0]?.finalState).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it("past the effect's timeoutMs, or the step's, the remote task is cancelled; the flow sees the timeout", async () => {
    const remote = await agent();
    const own = a2a({ url: remote.url, timeoutMs: 300 });
    const plain = a2a({ url: remote.url });
    const f = flow$("times-out", async (ctx) => {
      const codeOf = (e: unknown) => [e instanceof A2ATimeoutError, isLoomError(e) ? e.code : "?"];
      const a = await ctx.execute(own, { text: "slow again" }).catch(codeOf);
      const b = await ctx
        .execute(plain, { text: "slow once more" }, { timeoutMs: 300, retry: false })
        .catch(codeOf);
      return [a, b];
    });
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out.output).toEqual([
      [true, "LOOM_A2A_TIMEOUT"],
      [false, "LOOM_STEP_TIMEOUT"],
    ]);
    // Not retried: one task each, and each was cancelled.
    expect(remote.tasks.map((t) => t.text)).toEqual(["slow again", "slow once more"]);
    expect(remote.cancels.map((c) => c.taskId)).toEqual(remote.tasks.map((t) => t.taskId));
    expect(remote.tasks.map((t) => t.finalState)).toEqual([
      TaskState.TASK_STATE_CANCELED,
      TaskState.TASK_STATE_CANCELED,
    ]);
  });

  it("a failed remote task is A2ATaskFailedError, recorded with its code and not retried", async () => {
    const remote = await agent();
    const call = a2a({ url: remote.url });
    // a2a.ts 4: failed is a typed error, with the task's id, state and message in its details.
    const f = flow$("fails", async (ctx) =>
      ctx.execute(call, { text: "fail please" }).catch((e: unknown) => ({
        typed: e instanceof A2ATaskFailedError,
        code: isLoomError(e) ? e.code : "?",
        details: isLoomError(e) ? (e.details ?? null) : null,
      })),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null);
    const out = await h.result();
    const taskId = remote.tasks[0]?.taskId;
    expect(out.output).toEqual({
      typed: true,
      code: "LOOM_A2A_TASK_FAILED",
      details: {
        taskId,
        contextId: remote.tasks[0]?.contextId,
        state: "failed",
        text: "refused: fail please",
      },
    });
    expect(remote.tasks).toHaveLength(1);
    const failed = payloadsOf(await r.readLog(h.id), "STEP_FAILED");
    expect(failed.map((p) => (p.error as { code?: string }).code)).toEqual([
      "LOOM_A2A_TASK_FAILED",
    ]);
  });

  for (const stream of [true, false]) {
    it(`input-required returns with that state; the flow answers on the same task (${stream ? "streamed" : "polled"})`, async () => {
      const remote = await agent();
      const call = a2a({ url: remote.url, stream });
      // a2a.ts 4: input-required is a result; the answer first meets the task's old status.
      const f = flow$(`asks-${stream}`, async (ctx) => {
        const first: A2AResult = await ctx.execute(call, { text: "ask me" });
        const second = await ctx.execute(call, {
          text: "the blue one",
          ...(first.taskId === undefined ? {} : { taskId: first.taskId }),
          contextId: first.contextId,
        });
        return [first.state, first.text, second.state, second.text, first.taskId === second.taskId];
      });
      const r = rt(memoryStore()).registerFlow(f);
      const out = await (await r.start(f, null)).result();
      expect(out.output).toEqual([
        "input-required",
        "which one?",
        "completed",
        "answer: the blue one",
        true,
      ]);
      expect(remote.tasks.map((t) => t.text)).toEqual(["ask me", "the blue one"]);
    });
  }

  it("bad options are an InvalidInputError at creation", () => {
    const bad: unknown[] = [
      { url: "" },
      { url: "ftp://127.0.0.1/" },
      { url: "http://127.0.0.1", timeoutMs: 0 },
      { url: "http://127.0.0.1", cancelTimeoutMs: -1 },
      { url: "http://127.0.0.1", stream: "yes" },
    ];
    for (const options of bad) {
      let thrown: unknown;
      try {
        createA2AEffect(options as A2AEffectOptions);
      } catch (e) {
        thrown = e;
      }
      expect(thrown, JSON.stringify(options)).toBeInstanceOf(InvalidInputError);
      expect(isLoomError(thrown, "LOOM_INVALID_INPUT")).toBe(true);
    }
  });
});
