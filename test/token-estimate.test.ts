/**
 * What a call reserves bounds what it can spend (issues 20, 26; the red team's two breaks of the
 * rate limits): Loom's token estimate counts text that is not English (providers/stream.ts
 * `estimateTokens`), and an OpenAI call that names no `maxTokens` asks for at most what it
 * reserved, as Anthropic's always did.
 */
import { generateText } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { afterEach, describe, expect, it } from "vitest";
import { durableModel } from "../src/ai-sdk/index.ts";
import { flow$, memoryStore } from "../src/index.ts";
import { DEFAULT_MAX_TOKENS, llmReservation } from "../src/providers/llm-core.ts";
import { openAiEffect } from "../src/providers/openai.ts";
import { estimateTokens, streamTokenBudget } from "../src/providers/stream.ts";
import { fakeOpenAi, type FakeOpenAi } from "../src/testing/index.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();
const fakes: FakeOpenAi[] = [];
afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

describe("Loom's token estimate", () => {
  it("counts ASCII at 4 characters to a token and any other character as one", () => {
    expect(estimateTokens("")).toBe(0);
    expect(estimateTokens("abcd")).toBe(1);
    expect(estimateTokens("abcde")).toBe(2);
    expect(estimateTokens("日".repeat(4000))).toBe(4000);
    // A character outside the BMP (two UTF-16 units) is one character.
    expect(estimateTokens("🙂🙂")).toBe(2);
    expect(estimateTokens("héllo")).toBe(2);
  });

  it("a CJK prompt reserves a token per character, not a quarter", () => {
    const input = { messages: [{ role: "user" as const, content: "日".repeat(4000) }] };
    expect(llmReservation(input).tokens?.input).toBe(4000);
    // English text keeps its characters / 4.
    const english = { messages: [{ role: "user" as const, content: "x".repeat(4000) }] };
    expect(llmReservation(english).tokens?.input).toBe(1000);
  });

  it("the stream guard counts CJK output a token per character", () => {
    const guard = streamTokenBudget(100);
    const ectx = { stepId: "s", resources: {} } as unknown as Parameters<typeof guard>[0]["ectx"];
    const text = "日".repeat(101);
    expect(() => guard({ text, delta: text, inputTokens: 0, ectx })).toThrow(/severed/);
  });
});

describe("a call without maxTokens asks for what it reserved", () => {
  it("openAiEffect sends max_completion_tokens (chat) and max_output_tokens (responses)", async () => {
    const fake = await fakeOpenAi({ text: "ok" });
    fakes.push(fake);
    const chat = openAiEffect({ model: "gpt-4o", baseURL: fake.baseURL, apiKey: "t" });
    const responses = openAiEffect({
      model: "gpt-4o",
      baseURL: fake.baseURL,
      apiKey: "t",
      api: "responses",
    });
    const f = flow$("no-max", async (ctx) => {
      const ask = { messages: [{ role: "user" as const, content: "hi" }] };
      await ctx.execute(chat, ask);
      await ctx.execute(responses, ask);
      return "ok";
    });
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start(f, null)).result()).status).toBe("completed");
    const [a, b] = fake.requests.map((q) => q.body as Record<string, unknown>);
    expect(a?.max_completion_tokens).toBe(DEFAULT_MAX_TOKENS);
    expect(b?.max_output_tokens).toBe(DEFAULT_MAX_TOKENS);
  });

  it("durableModel passes maxOutputTokens to the model it wraps", async () => {
    const fake = await fakeOpenAi({ text: "ok" });
    fakes.push(fake);
    const model = durableModel(createOpenAI({ baseURL: fake.baseURL, apiKey: "t" }).chat("gpt-4o"));
    const f = flow$("sdk-no-max", async () => (await generateText({ model, prompt: "hi" })).text);
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start(f, null)).result()).output).toBe("ok");
    const body = fake.requests[0]?.body as Record<string, unknown>;
    expect(body.max_completion_tokens ?? body.max_tokens).toBe(DEFAULT_MAX_TOKENS);
  });
});
