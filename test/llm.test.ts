import { afterEach, describe, expect, it } from "vitest";
import {
  flow$,
  isLoomError,
  memoryStore,
  PRICE_SOURCE,
  QuotaExceededError,
  streamTokenBudget,
  timeline,
  type LlmResult,
  InvalidInputError,
  type LlmInput,
  type StreamGuard,
} from "../src/index.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { openAiEffect } from "../src/providers/openai.ts";
import {
  fakeAnthropic,
  fakeOpenAi,
  type FakeAnthropic,
  type FakeAnthropicOptions,
  type FakeRequest,
} from "../src/testing/index.ts";
import { expectReplayEquality, runtimes, until } from "./helpers.ts";

const rt = runtimes();
/** Both fake servers, as the tests use them. */
type Fake = Pick<FakeAnthropic, "baseURL" | "requests" | "close">;
/** Anthropic's options; the OpenAI fake maps them onto its own. */
type ServerOptions = FakeAnthropicOptions;
/** What a test sets on an effect beyond its provider. */
interface Extra {
  stream?: boolean;
  guard?: StreamGuard;
}
const servers: Fake[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** The OpenAI fake, reporting what the Anthropic options ask for in OpenAI's terms. */
const openAiServer = (o: ServerOptions): Promise<Fake> =>
  fakeOpenAi({
    ...o,
    promptTokens: (o.inputTokens ?? 0) + (o.cacheReadTokens ?? 0) + (o.cacheWriteTokens ?? 0),
    cachedTokens: o.cacheReadTokens ?? 0,
    cacheWriteTokens: o.cacheWriteTokens ?? 0,
  });

/** Each provider: its fake server, its effect, and what it reports for the same call. */
const PROVIDERS = [
  {
    provider: "anthropic",
    effect: (baseURL: string, extra: Extra = {}) =>
      anthropicEffect({ provider: "anthropic", model: "claude-sonnet-4-6", baseURL, ...extra }),
    server: (o: ServerOptions): Promise<Fake> => fakeAnthropic(o),
    // Anthropic reports cache reads and writes besides the input.
    usage: { inputTokens: 20, outputTokens: 8, cacheReadTokens: 100, cacheWriteTokens: 10 },
    /** The input tokens the guard counts: the provider's, reported at message_start. */
    guardInput: 10,
    stopReason: "end_turn",
    plain: true,
    toolStop: "tool_use",
    /** The tool as sent, and the second turn: the call and its result in Anthropic's form. */
    toolSent: { name: "weather", input_schema: { type: "object" } },
    turns: (b: FakeRequest["body"]) => b.messages,
    callTurn: {
      role: "assistant",
      content: [{ type: "tool_use", id: "call_1", name: "weather", input: { city: "Oslo" } }],
    },
    resultTurn: {
      role: "user",
      content: [{ type: "tool_result", tool_use_id: "call_1", content: "18°C" }],
    },
  },
  {
    provider: "openai",
    effect: (baseURL: string, extra: Extra = {}) =>
      openAiEffect({ provider: "openai", model: "gpt-4o", baseURL, ...extra }),
    server: openAiServer,
    // OpenAI reports cache reads and writes inside prompt_tokens.
    usage: { inputTokens: 20, outputTokens: 8, cacheReadTokens: 100, cacheWriteTokens: 10 },
    /** OpenAI reports usage only at the end: the guard counts the prompt's characters / 4. */
    guardInput: 5,
    stopReason: "stop",
    plain: true,
    toolStop: "tool_calls",
    toolSent: {
      type: "function",
      function: { name: "weather", description: "Today's weather", parameters: { type: "object" } },
    },
    turns: (b: FakeRequest["body"]) => b.messages,
    callTurn: {
      role: "assistant",
      tool_calls: [
        {
          id: "call_1",
          type: "function",
          function: { name: "weather", arguments: '{"city":"Oslo"}' },
        },
      ],
    },
    resultTurn: { role: "tool", tool_call_id: "call_1", content: "18°C" },
  },
  {
    provider: "openai-responses",
    effect: (baseURL: string, extra: Extra = {}) =>
      openAiEffect({ provider: "openai", api: "responses", model: "gpt-4o", baseURL, ...extra }),
    server: openAiServer,
    // OpenAI reports cache reads and writes inside prompt_tokens.
    usage: { inputTokens: 20, outputTokens: 8, cacheReadTokens: 100, cacheWriteTokens: 10 },
    /** OpenAI reports usage only at the end: the guard counts the prompt's characters / 4. */
    guardInput: 5,
    stopReason: "completed",
    plain: true,
    toolStop: "completed",
    toolSent: { type: "function", name: "weather", parameters: { type: "object" } },
    turns: (b: FakeRequest["body"]) => b.input,
    callTurn: {
      type: "function_call",
      call_id: "call_1",
      name: "weather",
      arguments: '{"city":"Oslo"}',
    },
    resultTurn: { type: "function_call_output", call_id: "call_1", output: "18°C" },
  },
];

const ask = { messages: [{ role: "user" as const, content: "tell me about tides" }] };

for (const p of PROVIDERS) {
  describe(`the LLM effect: ${p.provider} through the official SDK (issue 6)`, () => {
    async function server(options: ServerOptions): Promise<Fake> {
      const s = await p.server(options);
      servers.push(s);
      return s;
    }
    const effect = p.effect;

    for (const stream of p.plain ? [true, false] : [true]) {
      it(`meters a completed ${stream ? "streaming" : "plain"} call with the provider's tokens and the recorded price`, async () => {
        const fake = await server({
          text: "Tides rise and fall twice a day.",
          inputTokens: 20,
          cacheReadTokens: 100,
          cacheWriteTokens: 10,
        });
        const llm = effect(fake.baseURL, { stream });
        const f = flow$("asks", async (ctx) => ctx.execute(llm, ask));
        const r = rt(memoryStore()).registerFlow(f);
        const out = await (await r.start(f, null, { id: `llm-${p.provider}-${stream}` })).result();
        const result = out.output as unknown as LlmResult;
        expect(result.text).toBe("Tides rise and fall twice a day.");
        expect(result.stopReason).toBe(p.stopReason);
        expect(result.usage).toEqual(p.usage);
        expect(result.price?.source).toBe(PRICE_SOURCE);
        expect(result.price?.usd).toBeGreaterThan(0);
        const state = await r.getState(`llm-${p.provider}-${stream}`);
        expect(state._resources?.tokens).toEqual({ input: 130, output: 8 });
        expect(state._resources?.costUsd).toBeCloseTo(result.price?.usd ?? -1, 12);
        expect(fake.requests).toHaveLength(1);
        expect(fake.requests[0]?.body.stream ?? false).toBe(stream);
        await expectReplayEquality(r, `llm-${p.provider}-${stream}`);
      });
    }

    for (const stream of [true, false]) {
      it(`returns the model's tool calls and sends tool results back in the provider's form (${stream ? "streaming" : "plain"})`, async () => {
        const fake = await server({
          text: "Let me check.",
          toolCalls: [{ id: "call_1", name: "weather", input: { city: "Oslo" } }],
        });
        const llm = effect(fake.baseURL, { stream });
        const tools = [
          { name: "weather", description: "Today's weather", inputSchema: { type: "object" } },
        ];
        const f = flow$("tools", async (ctx) => {
          const first = await ctx.execute(llm, { ...ask, tools });
          const call = first.toolCalls[0];
          if (!call) return { first, second: null };
          const next: LlmInput = {
            tools,
            messages: [
              ...ask.messages,
              { role: "assistant", content: "", toolCalls: first.toolCalls },
              { role: "tool", toolCallId: call.id, content: "18°C" },
            ],
          };
          return { first, second: await ctx.execute(llm, next) };
        });
        const r = rt(memoryStore()).registerFlow(f);
        const out = await (
          await r.start(f, null, { id: `tools-${p.provider}-${stream}` })
        ).result();
        const { first } = out.output as unknown as { first: LlmResult };
        expect(first.toolCalls).toEqual([
          { id: "call_1", name: "weather", input: { city: "Oslo" } },
        ]);
        expect(first.stopReason).toBe(p.toolStop);
        expect(first.text).toBe("Let me check.");
        expect(fake.requests).toHaveLength(2);
        expect(fake.requests[0]?.body.tools).toEqual([expect.objectContaining(p.toolSent)]);
        const turns = p.turns(fake.requests[1]?.body ?? {}) as unknown[];
        expect(turns).toContainEqual(expect.objectContaining(p.callTurn));
        expect(turns.at(-1)).toEqual(p.resultTurn);
        await expectReplayEquality(r, `tools-${p.provider}-${stream}`);
      });
    }

    it("refuses a malformed input before anything is recorded or sent", async () => {
      const fake = await server({});
      const llm = effect(fake.baseURL);
      const bad = [
        { messages: [] },
        { messages: [{ role: "system", content: "hi" }] },
        { messages: [{ role: "tool", content: "18°C" }] },
        { messages: [{ role: "user", content: "hi" }], maxTokens: 0 },
        { messages: [{ role: "user", content: "hi" }], tools: [{ name: "weather" }] },
        { messages: [{ role: "assistant", content: "", toolCalls: [null] }] },
      ];
      const f = flow$("malformed", async (ctx) => {
        const seen: string[] = [];
        for (const input of bad) {
          await ctx.execute(llm, input as unknown as LlmInput).then(
            () => seen.push("ran"),
            (e: unknown) => seen.push(e instanceof InvalidInputError ? e.message : "other"),
          );
        }
        return seen;
      });
      const r = rt(memoryStore()).registerFlow(f);
      const out = await (await r.start(f, null, { id: "malformed-1" })).result();
      const seen = out.output as string[];
      expect(seen).toHaveLength(6);
      for (const m of seen) expect(m).toMatch(/^LLM input: /);
      expect(seen[2]).toContain("toolCallId");
      expect(fake.requests).toHaveLength(0);
      const kinds = (await r.readLog("malformed-1")).map((e) => e.kind);
      expect(kinds).toEqual(["EXECUTION_STARTED", "EXECUTION_COMPLETED"]);
    });

    it("severs an over-budget stream mid-stream: QUOTA_EXCEEDED flagged as an estimate, at most one delta past", async () => {
      const text = "x".repeat(400); // 100 tokens at chars/4, in 50 deltas of 8 characters
      const fake = await server({ text, deltaChars: 8, deltaMs: 2, inputTokens: 10 });
      const llm = effect(fake.baseURL, { guard: streamTokenBudget(40) });
      const f = flow$("over", async (ctx) =>
        ctx.execute(llm, ask).then(
          () => "finished",
          (e: unknown) =>
            e instanceof QuotaExceededError ? "quota" : isLoomError(e) ? e.code : "?",
        ),
      );
      const r = rt(memoryStore()).registerFlow(f);
      const out = await (await r.start(f, null, { id: "over-1" })).result();
      expect(out.output).toBe("quota");
      await until(() => fake.requests[0]?.closedEarly === true, 2000);
      const req = fake.requests[0];
      expect(req?.deltasTotal).toBe(50);
      expect(req?.deltasSent).toBeLessThan(req?.deltasTotal ?? 0);
      const log = await r.readLog("over-1");
      const quota = log.find((e) => e.kind === "QUOTA_EXCEEDED")?.payload as Record<
        string,
        unknown
      >;
      expect(quota).toMatchObject({ dimension: "tokens", estimated: true, limit: 40 });
      expect(timeline(log).map((row) => row.text)).toContain(
        "step llm#0 refused: tokens budget of 40 exceeded (an estimate, mid-stream)",
      );
      const failed = log.find((e) => e.kind === "STEP_FAILED")?.payload as {
        error: { code: string };
      };
      expect(failed.error.code).toBe("LOOM_QUOTA_EXCEEDED");
      const metered = log.find((e) => e.kind === "RESOURCE_METERED")?.payload as {
        delta: { tokens: { input: number; output: number }; estimated?: boolean };
      };
      expect(metered.delta.estimated).toBe(true);
      expect(metered.delta.tokens.input).toBe(p.guardInput);
      // The estimate is priced, so a cost budget sees a severed attempt too.
      expect((metered.delta as { costUsd?: number }).costUsd).toBeGreaterThan(0);
      // At most one delta (8 characters, 2 tokens) past the budget reached the client.
      expect(p.guardInput + metered.delta.tokens.output - 40).toBeGreaterThan(0);
      expect(p.guardInput + metered.delta.tokens.output - 40).toBeLessThanOrEqual(2);
    });

    it("a cancel during a stream closes the connection before the answer ends and says cancelled, not quota", async () => {
      const fake = await server({ text: "y".repeat(4000), deltaChars: 4, deltaMs: 10 });
      const llm = effect(fake.baseURL, { guard: streamTokenBudget(1_000_000) });
      const f = flow$("long-answer", async (ctx) => ctx.execute(llm, ask));
      const r = rt(memoryStore()).registerFlow(f);
      const h = await r.start(f, null, { id: "cancel-stream" });
      await until(() => (fake.requests[0]?.deltasSent ?? 0) > 5, 5000);
      expect(await h.cancel("enough")).toBe(true);
      await until(() => fake.requests[0]?.closedEarly === true, 1000);
      // Closed before the answer's 1000 deltas were all sent (a latency figure is a bench's job).
      expect(fake.requests[0]?.deltasSent ?? Infinity).toBeLessThan(1000);
      const outcome = await h.result();
      expect(outcome.error?.code).toBe("LOOM_CANCELLED");
      const log = await r.readLog(h.id);
      const kinds = log.map((e) => e.kind);
      expect(kinds.slice(-2)).toEqual(["STEP_CANCELLED", "EXECUTION_CANCELLED"]);
      expect(kinds).not.toContain("QUOTA_EXCEEDED");
      // What the stream had cost when it was cut is metered (an estimate), not only wall time:
      // "start an expensive call, cancel, repeat" cannot evade a token budget.
      const metered = log.find((e) => e.kind === "RESOURCE_METERED")?.payload as {
        delta: { tokens?: { output?: number }; costUsd?: number; estimated?: boolean };
      };
      expect(metered.delta.estimated).toBe(true);
      expect(metered.delta.tokens?.output).toBeGreaterThan(0);
      expect(metered.delta.costUsd).toBeGreaterThan(0);
    });

    it("a step timeout during a stream meters what the stream had cost", async () => {
      const fake = await server({ text: "t".repeat(4000), deltaChars: 4, deltaMs: 5 });
      const llm = effect(fake.baseURL);
      const f = flow$("timed-out-stream", async (ctx) =>
        ctx.execute(llm, ask, { timeoutMs: 150, retry: false }).then(
          () => "finished",
          (e: unknown) => (isLoomError(e) ? e.code : "other"),
        ),
      );
      const r = rt(memoryStore()).registerFlow(f);
      const out = await (await r.start(f, null, { id: "timeout-stream" })).result();
      expect(out.output).toBe("LOOM_STEP_TIMEOUT");
      const metered = (await r.readLog("timeout-stream")).find((e) => e.kind === "RESOURCE_METERED")
        ?.payload as { delta: { tokens?: { output?: number }; estimated?: boolean } };
      expect(metered.delta.estimated).toBe(true);
      expect(metered.delta.tokens?.output).toBeGreaterThan(0);
    });

    it("the caller sees the deltas live, and the log holds only the step's result", async () => {
      const text = "The moon pulls the sea; the sea answers twice a day.";
      const fake = await server({ text, deltaChars: 5, deltaMs: 5 });
      const llm = effect(fake.baseURL);
      const f = flow$("live", async (ctx) => (await ctx.execute(llm, ask)).text);
      const r = rt(memoryStore()).registerFlow(f);
      const h = await r.start(f, null, { id: "live-1" });
      const seen: string[] = [];
      for await (const d of h.deltas()) {
        expect(d.stepId).toBe("llm#0");
        seen.push(d.text);
      }
      expect(seen.length).toBeGreaterThan(5);
      expect(seen.join("")).toBe(text);
      expect((await h.result()).output).toBe(text);
      const kinds = (await r.readLog("live-1")).map((e) => e.kind);
      expect(kinds).toEqual([
        "EXECUTION_STARTED",
        "STEP_STARTED",
        "RESOURCE_METERED",
        "STEP_COMPLETED",
        "EXECUTION_COMPLETED",
      ]);
    });

    {
      it("a stream that fails midway (an error event) is metered as an estimate and retried by Loom", async () => {
        const fake = await server({ text: "w".repeat(80), inputTokens: 12, errorAfter: [3] });
        const llm = effect(fake.baseURL);
        const f = flow$("midway", async (ctx) =>
          ctx.execute(llm, ask, { retry: { initialDelayMs: 5, jitter: 0 } }),
        );
        const r = rt(memoryStore()).registerFlow(f);
        const out = await (await r.start(f, null, { id: "midway-1" })).result();
        expect((out.output as unknown as LlmResult).text).toBe("w".repeat(80));
        expect(fake.requests).toHaveLength(2);
        const log = await r.readLog("midway-1");
        const metered = log
          .filter((e) => e.kind === "RESOURCE_METERED")
          .map((e) => (e.payload as { delta: { tokens?: unknown; estimated?: boolean } }).delta);
        // The failed attempt: 3 deltas of 8 characters estimated; its input is Anthropic's from
        // message_start, or for OpenAI (no usage until the end) the prompt's characters / 4.
        const input = p.provider === "anthropic" ? 12 : p.guardInput;
        expect(metered[0]).toMatchObject({ tokens: { input, output: 6 }, estimated: true });
        expect(metered[1]).toMatchObject({ tokens: { input: 12, output: 20 } });
        expect(metered[1]?.estimated).toBeUndefined();
      });
    }

    it("a guard needs a stream: a guard with stream: false is refused at creation", () => {
      expect(() =>
        effect("http://127.0.0.1:9/v1", { stream: false, guard: streamTokenBudget(10) }),
      ).toThrow(InvalidInputError);
    });

    it("the SDK's retries are off: every request the server saw is an attempt in the log", async () => {
      const fake = await server({ failFirst: [529, 500] });
      const llm = effect(fake.baseURL);
      const f = flow$("retried", async (ctx) =>
        ctx.execute(llm, ask, { retry: { initialDelayMs: 5, jitter: 0 } }),
      );
      const r = rt(memoryStore()).registerFlow(f);
      const out = await (await r.start(f, null, { id: "retried-1" })).result();
      expect(out.status).toBe("completed");
      expect(fake.requests).toHaveLength(3);
      const log = await r.readLog("retried-1");
      const failedAttempts = log.filter(
        (e) => e.kind === "STEP_FAILED" && (e.payload as { retrying?: boolean }).retrying === true,
      );
      expect(failedAttempts).toHaveLength(2);
      expect((await r.getState("retried-1")).frames["llm#0"]?.attempts).toBe(3);
    });
  });
}

describe("Anthropic usage details (issue 6 review)", () => {
  it("the guard counts cache tokens, as metering does", async () => {
    const fake = await fakeAnthropic({
      text: "z".repeat(40),
      inputTokens: 10,
      cacheReadTokens: 5000,
    });
    servers.push(fake);
    const llm = anthropicEffect({
      provider: "anthropic",
      model: "claude-sonnet-4-6",
      baseURL: fake.baseURL,
      guard: streamTokenBudget(100),
    });
    const f = flow$("cached-guard", async (ctx) =>
      ctx.execute(llm, ask, { retry: false }).then(
        () => "finished",
        (e: unknown) => (e instanceof QuotaExceededError ? "quota" : "other"),
      ),
    );
    const r = rt(memoryStore()).registerFlow(f);
    // 10 input and 10 output tokens fit in 100; with the 5,000 read from the cache they do not.
    expect((await (await r.start(f, null, { id: "cg-1" })).result()).output).toBe("quota");
  });

  it("message_delta's cumulative input figure overwrites message_start's", async () => {
    const fake = await fakeAnthropic({ inputTokens: 10, finalInputTokens: 900 });
    servers.push(fake);
    const llm = anthropicEffect({
      provider: "anthropic",
      model: "claude-sonnet-4-6",
      baseURL: fake.baseURL,
    });
    const f = flow$("final-input", async (ctx) => (await ctx.execute(llm, ask)).usage.inputTokens);
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start(f, null, { id: "fi-1" })).result()).output).toBe(900);
  });
});
