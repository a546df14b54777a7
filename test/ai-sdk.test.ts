/**
 * loomwork/ai-sdk (issue 27): AI SDK models and tools as Loom steps. `@ai-sdk/openai` and
 * `@ai-sdk/anthropic` reach Loom's fake servers (their real wire formats), beside the native
 * effects on the same answers: usage and price in the log are the same (AU1, AU2, AM6); a stream
 * severed by `streamTokenBudget` overshoots by at most one delta and records QUOTA_EXCEEDED
 * (AM4); a call outside a flow is refused (AM1).
 */
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, tool, type ToolExecutionOptions } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { durableModel, durableTools, NotInFlowError } from "../src/ai-sdk/index.ts";
import {
  flow$,
  InvalidInputError,
  isLoomError,
  memoryStore,
  QuotaExceededError,
  streamTokenBudget,
  type Envelope,
} from "../src/index.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { openAiEffect } from "../src/providers/openai.ts";
import { fakeAnthropic, fakeOpenAi, type FakeAnthropicOptions } from "../src/testing/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

const MODEL = { openai: "gpt-4o-mini", anthropic: "claude-3-5-haiku-latest" } as const;

/** Each provider: its fake, the AI SDK's model for it, and Loom's native effect. */
const PROVIDERS = [
  {
    provider: "openai" as const,
    async fake(o: FakeAnthropicOptions) {
      const f = await fakeOpenAi({
        ...o,
        promptTokens: (o.inputTokens ?? 0) + (o.cacheReadTokens ?? 0),
        cachedTokens: o.cacheReadTokens ?? 0,
      });
      closers.push(() => f.close());
      return f;
    },
    sdkModel: (baseURL: string) => createOpenAI({ baseURL, apiKey: "test" }).chat(MODEL.openai),
    native: (baseURL: string) => openAiEffect({ model: MODEL.openai, baseURL, apiKey: "test" }),
  },
  {
    provider: "anthropic" as const,
    async fake(o: FakeAnthropicOptions) {
      const f = await fakeAnthropic(o);
      closers.push(() => f.close());
      return f;
    },
    sdkModel: (baseURL: string) => createAnthropic({ baseURL, apiKey: "test" })(MODEL.anthropic),
    native: (baseURL: string) =>
      anthropicEffect({ model: MODEL.anthropic, baseURL, apiKey: "test" }),
  },
];

/** What each call metered, without its wall time (which no two calls share). */
const metered = (log: readonly Envelope[]) =>
  log
    .filter((e) => e.kind === "RESOURCE_METERED")
    .map((e) => {
      const payload = e.payload as { delta: { wallMs?: number } };
      const { wallMs: _wall, ...delta } = payload.delta;
      return delta;
    });

describe.each(PROVIDERS)("durableModel over $provider (issue 27)", (p) => {
  it("AU1, AU2, AM6: a generateText and a streamText call meter the same tokens and price as the native effect", async () => {
    const answer = { text: "The answer is forty-two.", inputTokens: 120, cacheReadTokens: 30 };
    const fake = await p.fake(answer);
    const model = durableModel(p.sdkModel(fake.baseURL));
    const native = p.native(fake.baseURL);
    const viaSdk = flow$("via-sdk", async () => {
      const a = await generateText({ model, prompt: "question", maxOutputTokens: 100 });
      const b = streamText({ model, prompt: "question", maxOutputTokens: 100 });
      return [a.text, await b.text];
    });
    const viaNative = flow$("via-native", async (ctx) => {
      const a = await ctx.execute(native, {
        messages: [{ role: "user", content: "question" }],
        maxTokens: 100,
      });
      return a.text;
    });
    const r = rt(memoryStore()).registerFlow(viaSdk).registerFlow(viaNative);
    const sdk = await (await r.start(viaSdk, null, { id: "sdk" })).result();
    expect(sdk.output).toEqual([answer.text, answer.text]);
    const nat = await (await r.start(viaNative, null, { id: "native" })).result();
    expect(nat.output).toBe(answer.text);
    const [fromNative] = metered(await r.readLog("native"));
    const [generated, streamed] = metered(await r.readLog("sdk"));
    expect(fromNative).toMatchObject({
      tokens: { input: 150 },
      priced: { model: MODEL[p.provider] },
    });
    expect((fromNative as { costUsd: number }).costUsd).toBeGreaterThan(0);
    expect(generated).toEqual(fromNative);
    expect(streamed).toEqual(fromNative);
  });

  it("AM4: a streamText severed by streamTokenBudget overshoots by at most one delta and records QUOTA_EXCEEDED", async () => {
    const text = "x".repeat(400); // 100 tokens at chars/4, in 50 deltas of 8 characters
    const fake = await p.fake({ text, deltaChars: 8, deltaMs: 2, inputTokens: 10 });
    const model = durableModel(p.sdkModel(fake.baseURL), { guard: streamTokenBudget(40) });
    const f = flow$("severed", async () => {
      // streamText hands a failed call to its full stream as an error part.
      let failure: unknown;
      const s = streamText({ model, prompt: "q", maxOutputTokens: 200, onError: () => undefined });
      for await (const part of s.fullStream) if (part.type === "error") failure = part.error;
      if (failure instanceof QuotaExceededError) return "quota";
      return isLoomError(failure) ? failure.code : String(failure);
    });
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "severed" })).result();
    expect(out.output).toBe("quota");
    await until(() => fake.requests[0]?.closedEarly === true, 2000);
    expect(fake.requests[0]?.deltasSent).toBeLessThan(50);
    const log = await r.readLog("severed");
    const quota = log.find((e) => e.kind === "QUOTA_EXCEEDED")?.payload;
    expect(quota).toMatchObject({ dimension: "tokens", estimated: true, limit: 40 });
    const failed = log.find((e) => e.kind === "STEP_FAILED")?.payload as {
      error: { code: string };
    };
    expect(failed.error.code).toBe("LOOM_QUOTA_EXCEEDED");
    const [m] = metered(log) as {
      tokens: { input: number; output: number };
      estimated?: boolean;
    }[];
    expect(m?.estimated).toBe(true);
    const over = (m?.tokens.input ?? 0) + (m?.tokens.output ?? 0) - 40;
    expect(over).toBeGreaterThan(0);
    expect(over).toBeLessThanOrEqual(2); // one delta: 8 characters, 2 tokens
    // One request in all: the SDK's own retry never took the failure up (AM2).
    expect(fake.requests).toHaveLength(1);
  });
});

describe("durableModel under Loom's rules (issue 27 item 1)", () => {
  const openai = PROVIDERS[0]!;

  it("AM2: a failed call is retried by Loom's policy only: two requests for one 500, none from the SDK's own retries", async () => {
    const fake = await openai.fake({ text: "fine", failFirst: [500] });
    const model = durableModel(openai.sdkModel(fake.baseURL), {
      retry: { maxAttempts: 2, initialDelayMs: 1 },
    });
    const f = flow$("retried", async () => (await generateText({ model, prompt: "q" })).text);
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start(f, null, { id: "retried" })).result()).output).toBe("fine");
    expect(fake.requests).toHaveLength(2);
    const log = await r.readLog("retried");
    expect(log.filter((e) => e.kind === "STEP_FAILED")).toHaveLength(1);

    // With Loom's policy at one attempt, the SDK's default retries (maxRetries 2) add none.
    const once = await openai.fake({ text: "fine", failFirst: [500, 500, 500] });
    const single = durableModel(openai.sdkModel(once.baseURL), { retry: false });
    const g = flow$("single", async () =>
      generateText({ model: single, prompt: "q" }).then(
        () => "answered",
        () => "failed",
      ),
    );
    r.registerFlow(g);
    expect((await (await r.start(g, null, { id: "single" })).result()).output).toBe("failed");
    expect(once.requests).toHaveLength(1);
  });

  it("AU2: a stream cut before its usage is metered from Loom's estimate, marked as one", async () => {
    const fake = await openai.fake({ text: "y".repeat(200), deltaChars: 10, errorAfter: [5] });
    const model = durableModel(openai.sdkModel(fake.baseURL), { retry: false });
    const f = flow$("cut", async () => {
      const s = streamText({ model, prompt: "q", onError: () => undefined });
      await s.consumeStream();
      return "done";
    });
    const r = rt(memoryStore()).registerFlow(f);
    await (await r.start(f, null, { id: "cut" })).result();
    const [m] = metered(await r.readLog("cut")) as {
      tokens: { output: number };
      estimated?: boolean;
    }[];
    expect(m?.estimated).toBe(true);
    expect(m?.tokens.output).toBe(13); // 5 deltas of 10 characters, at characters / 4
  });

  it("AU3: a call whose reservation would pass the execution's token budget is refused before any request", async () => {
    const fake = await openai.fake({ text: "never sent" });
    const model = durableModel(openai.sdkModel(fake.baseURL));
    const f = flow$("over-budget", async () =>
      generateText({ model, prompt: "q", maxOutputTokens: 500 }).then(
        () => "answered",
        (e: unknown) => (e instanceof QuotaExceededError ? "quota" : String(e)),
      ),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "over-budget", budget: { tokens: 100 } });
    expect((await h.result()).output).toBe("quota");
    expect(fake.requests).toHaveLength(0);
    const log = await r.readLog("over-budget");
    expect(log.some((e) => e.kind === "QUOTA_EXCEEDED")).toBe(true);
  });
});

describe("durableModel outside a flow (AM1)", () => {
  it("refuses a call outside a flow and inside a step's code, sending nothing", async () => {
    const fake = await PROVIDERS[0]!.fake({ text: "hi" });
    const model = durableModel(PROVIDERS[0]!.sdkModel(fake.baseURL));
    await expect(generateText({ model, prompt: "q", maxRetries: 0 })).rejects.toBeInstanceOf(
      NotInFlowError,
    );
    const f = flow$("in-step", async (ctx) =>
      ctx.run("inner", () =>
        generateText({ model, prompt: "q" }).then(
          () => "sent",
          (e: unknown) => (e instanceof NotInFlowError ? e.message : String(e)),
        ),
      ),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "in-step" })).result();
    expect(out.output).toMatch(/inside step "inner#0"/);
    expect(fake.requests).toHaveLength(0);
  });
});

describe("durableTools outside a flow, and what it refuses (AT4, AT5)", () => {
  const call: ToolExecutionOptions<unknown> = { toolCallId: "call_1", messages: [], context: {} };
  it("AT4: refuses an execution outside a flow and inside a step's code, before the tool runs", async () => {
    let runs = 0;
    const tools = durableTools({
      count: tool({
        inputSchema: z.object({}),
        execute: async () => ++runs,
      }),
    });
    const execute = tools.count.execute;
    await expect(execute?.({}, call)).rejects.toBeInstanceOf(NotInFlowError);
    const f = flow$("tool-in-step", async (ctx) =>
      ctx.run("inner", async () =>
        Promise.resolve(execute?.({}, call)).then(
          () => "ran",
          (e: unknown) => (e instanceof NotInFlowError ? e.message : String(e)),
        ),
      ),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "tool-in-step" })).result();
    expect(out.output).toMatch(/tool "count" of durableTools ran inside step "inner#0"/);
    expect(runs).toBe(0);
  });

  it("AT5: refuses step.taint when the tools are wrapped", () => {
    const tools = { t: tool({ inputSchema: z.object({}), execute: async () => 1 }) };
    expect(() => durableTools(tools, { step: { taint: "tool:t" } })).toThrow(InvalidInputError);
    expect(() => durableTools(tools, { step: { taint: "tool:t" } })).toThrow(/step.taint/);
  });
});

describe("durableModel finds the flow code that calls it (FS1)", () => {
  it("a call from a ctx.parallel branch records in the branch, one from a nestedBudget body counts against it", async () => {
    const usage = {
      inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
      outputTokens: { total: 2, text: 2, reasoning: 0 },
    };
    const mock = new MockLanguageModelV4({
      doGenerate: async () => ({
        content: [{ type: "text", text: "ok" }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      }),
    });
    const model = durableModel(mock, { provider: "mock" });
    const ask = () => generateText({ model, prompt: "q" }).then((r) => r.text);
    const f = flow$("scoped", async (ctx) => {
      const both = await ctx.parallel([() => ask(), () => ask()]);
      const inner = await ctx.nestedBudget("inner", { tokens: 10_000 }, () => ask());
      return [...both, inner];
    });
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "scoped" })).result();
    expect(out.output).toEqual(["ok", "ok", "ok"]);
    const calls = (await r.readLog("scoped"))
      .filter((e) => e.kind === "STEP_COMPLETED")
      .map((e) => (e.payload as { callId: string }).callId);
    expect(calls).toEqual(["par0.0/llm#0", "par0.1/llm#0", "llm#0"]);
    const state = await r.getState("scoped");
    // The nested body's one call: 3 input and 2 output tokens, against "inner" only.
    expect(state._scopeResources?.inner?.tokens).toEqual({ input: 3, output: 2 });
    expect(state._resources?.tokens).toEqual({ input: 9, output: 6 });
  });
});
