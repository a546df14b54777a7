import { afterEach, describe, expect, it } from "vitest";
import {
  createLlmEffect,
  fakeAnthropic,
  flow$,
  isLoomError,
  memoryStore,
  PRICE_SOURCE,
  QuotaExceededError,
  streamTokenBudget,
  type FakeAnthropic,
  type LlmResult,
} from "../src/index.ts";
import { expectReplayEquality, runtimes, until } from "./helpers.ts";

const rt = runtimes();
const servers: FakeAnthropic[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function server(options: Parameters<typeof fakeAnthropic>[0]) {
  const s = await fakeAnthropic(options);
  servers.push(s);
  return s;
}
const ask = { messages: [{ role: "user" as const, content: "tell me about tides" }] };

describe("createLlmEffect: Anthropic through the official SDK (issue 6)", () => {
  for (const stream of [true, false]) {
    it(`meters a completed ${stream ? "streaming" : "plain"} call with the provider's tokens and the recorded price`, async () => {
      const fake = await server({
        text: "Tides rise and fall twice a day.",
        inputTokens: 20,
        cacheReadTokens: 100,
        cacheWriteTokens: 10,
      });
      const llm = createLlmEffect({
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        baseURL: fake.baseURL,
        stream,
      });
      const f = flow$("asks", async (ctx) => ctx.execute(llm, ask));
      const r = rt(memoryStore()).registerFlow(f);
      const out = await (await r.start(f, null, { id: `llm-${stream}` })).result();
      const result = out.output as unknown as LlmResult;
      expect(result.text).toBe("Tides rise and fall twice a day.");
      expect(result.stopReason).toBe("end_turn");
      expect(result.usage).toEqual({
        inputTokens: 20,
        outputTokens: 8,
        cacheReadTokens: 100,
        cacheWriteTokens: 10,
      });
      expect(result.price?.source).toBe(PRICE_SOURCE);
      expect(result.price?.usd).toBeGreaterThan(0);
      const state = await r.getState(`llm-${stream}`);
      expect(state._resources?.tokens).toEqual({ input: 130, output: 8 });
      expect(state._resources?.costUsd).toBeCloseTo(result.price?.usd ?? -1, 12);
      expect(fake.requests).toHaveLength(1);
      expect(fake.requests[0]?.body.stream).toBe(stream);
      await expectReplayEquality(r, `llm-${stream}`);
    });
  }

  it("severs an over-budget stream mid-stream: QUOTA_EXCEEDED flagged as an estimate, at most one delta past", async () => {
    const text = "x".repeat(400); // 100 tokens at chars/4, in 50 deltas of 8 characters
    const fake = await server({ text, deltaChars: 8, deltaMs: 2, inputTokens: 10 });
    const llm = createLlmEffect({
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      baseURL: fake.baseURL,
      guard: streamTokenBudget(40),
    });
    const f = flow$("over", async (ctx) =>
      ctx.execute(llm, ask).then(
        () => "finished",
        (e: unknown) => (e instanceof QuotaExceededError ? "quota" : isLoomError(e) ? e.code : "?"),
      ),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "over-1" })).result();
    expect(out.output).toBe("quota");
    await until(() => fake.requests[0]?.closedEarly === true, 2000);
    const req = fake.requests[0];
    // 10 input + 30 output tokens (120 characters, 15 deltas) is the last that fits; the 16th
    // delta crosses: no more than one delta past the budget reached the client.
    expect(req?.deltasTotal).toBe(50);
    expect(req?.deltasSent).toBeLessThan(req?.deltasTotal ?? 0);
    const log = await r.readLog("over-1");
    const quota = log.find((e) => e.kind === "QUOTA_EXCEEDED")?.payload as Record<string, unknown>;
    expect(quota).toMatchObject({ dimension: "tokens", estimated: true, limit: 40 });
    const failed = log.find((e) => e.kind === "STEP_FAILED")?.payload as {
      error: { code: string };
    };
    expect(failed.error.code).toBe("LOOM_QUOTA_EXCEEDED");
    const metered = log.find((e) => e.kind === "RESOURCE_METERED")?.payload as {
      delta: { tokens: { input: number; output: number }; estimated?: boolean };
    };
    expect(metered.delta.estimated).toBe(true);
    expect(metered.delta.tokens.input).toBe(10);
    // The output the client saw: 16 deltas (the one that crossed) is 128 characters, 32 tokens.
    expect(metered.delta.tokens.output).toBeLessThanOrEqual(32);
    expect(10 + metered.delta.tokens.output - 40).toBeLessThanOrEqual(2); // one delta = 2 tokens
  });

  it("a cancel during a stream closes the connection within 1 s and says cancelled, not quota", async () => {
    const fake = await server({ text: "y".repeat(4000), deltaChars: 4, deltaMs: 10 });
    const llm = createLlmEffect({
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      baseURL: fake.baseURL,
      guard: streamTokenBudget(1_000_000),
    });
    const f = flow$("long-answer", async (ctx) => ctx.execute(llm, ask));
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "cancel-stream" });
    await until(() => (fake.requests[0]?.deltasSent ?? 0) > 5, 5000);
    const t0 = performance.now();
    expect(await h.cancel("enough")).toBe(true);
    await until(() => fake.requests[0]?.closedEarly === true, 1000);
    expect((fake.requests[0]?.closedAt ?? Infinity) - t0).toBeLessThan(1000);
    const outcome = await h.result();
    expect(outcome.error?.code).toBe("LOOM_CANCELLED");
    const kinds = (await r.readLog(h.id)).map((e) => e.kind);
    expect(kinds.slice(-2)).toEqual(["STEP_CANCELLED", "EXECUTION_CANCELLED"]);
    expect(kinds).not.toContain("QUOTA_EXCEEDED");
  });

  it("the SDK's retries are off: every request the server saw is an attempt in the log", async () => {
    const fake = await server({ failFirst: [529, 500] });
    const llm = createLlmEffect({
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      baseURL: fake.baseURL,
    });
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
