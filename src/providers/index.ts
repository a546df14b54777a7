/** LLM effects over the official provider SDKs (issue 6). OpenAI, MCP tools and A2A agents follow. */
import type { Effect } from "../runtime/flow.ts";
import {
  anthropicEffect,
  type AnthropicEffectOptions,
  type LlmInput,
  type LlmResult,
} from "./anthropic.ts";

export type LlmEffectOptions = AnthropicEffectOptions;

/** An LLM call as an effect: `ctx.execute(llm, { messages })`. */
export function createLlmEffect(options: LlmEffectOptions): Effect<LlmInput, LlmResult> {
  return anthropicEffect(options);
}

export type { LlmInput, LlmMessage, LlmResult, LlmUsage } from "./anthropic.ts";
export { PRICE_SOURCE } from "./anthropic.ts";
export { streamTokenBudget, charsOver4, type StreamGuard, type StreamProgress } from "./stream.ts";
