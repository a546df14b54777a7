/**
 * The flows of `npm run bench -- cancel`'s stream modes (cancel-stream.ts): one LLM call that
 * streams a long answer from the fake OpenAI server at `baseURL`, made by Loom's native OpenAI
 * effect (`native`) or by `streamText` over `durableModel` (`ai-sdk`), so the two are cancelled
 * the same way and their cancel-to-close latencies compare.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { streamText } from "ai";
import { durableModel } from "../src/ai-sdk/index.ts";
import { flow$ } from "../src/index.ts";
import { openAiEffect } from "../src/providers/openai.ts";

export const STREAM_KINDS = ["native", "ai-sdk"] as const;
export type StreamKind = (typeof STREAM_KINDS)[number];

const MODEL = "gpt-4o-mini";

/** The two flows, named `stream-native` and `stream-ai-sdk`, against one server. */
export function streamFlows(baseURL: string) {
  const native = openAiEffect({ model: MODEL, baseURL, apiKey: "bench" });
  const model = durableModel(createOpenAI({ baseURL, apiKey: "bench" }).chat(MODEL));
  return {
    native: flow$("stream-native", async (ctx) => {
      const r = await ctx.execute(native, { messages: [{ role: "user", content: "go" }] });
      return r.text;
    }),
    "ai-sdk": flow$("stream-ai-sdk", async () => {
      const s = streamText({ model, prompt: "go", onError: () => undefined });
      return s.text;
    }),
  };
}
