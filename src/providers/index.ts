/**
 * LLM and tool effects over the official SDKs (issue 6): Anthropic Messages, OpenAI Chat
 * Completions and Responses, MCP tools, A2A agents.
 */
import { InvalidInputError } from "../kernel/errors.ts";
import type { Effect, TaintingEffect } from "../runtime/flow.ts";
import { anthropicEffect, type AnthropicEffectOptions } from "./anthropic.ts";
import { openAiEffect, type OpenAiEffectOptions } from "./openai.ts";
import type { LlmInput, LlmResult } from "./llm-core.ts";

export type LlmEffectOptions = AnthropicEffectOptions | OpenAiEffectOptions;

/**
 * An LLM call as an effect: `ctx.execute(llm, { messages })`. With `taint`, every answer is a
 * taint wrapper (`Tainted<LlmResult>`).
 */
export function createLlmEffect(
  options: LlmEffectOptions & { taint: string },
): TaintingEffect<LlmInput, LlmResult>;
export function createLlmEffect(options: LlmEffectOptions): Effect<LlmInput, LlmResult>;
export function createLlmEffect(options: LlmEffectOptions): Effect<LlmInput, LlmResult> {
  if (options.provider === "openai") return openAiEffect(options);
  if (options.provider === "anthropic") return anthropicEffect(options);
  throw new InvalidInputError(
    `createLlmEffect: unknown provider ${JSON.stringify((options as { provider?: unknown }).provider)} (known: anthropic, openai)`,
  );
}

export type {
  LlmInput,
  LlmMessage,
  LlmResult,
  LlmTool,
  LlmToolCall,
  LlmUsage,
} from "./llm-core.ts";
export { collectStream, PRICE_SOURCE, type CollectStreamOptions } from "./llm-core.ts";
export { type LiveDelta } from "./deltas.ts";
export {
  createToolEffect,
  ToolTimeoutError,
  type ToolEffect,
  type ToolEffectOptions,
  type ToolResult,
  type ToolTransport,
} from "./mcp.ts";
export {
  createA2AEffect,
  A2ATaskCanceledError,
  A2ATaskFailedError,
  A2ATimeoutError,
  type A2AEffect,
  type A2AEffectOptions,
  type A2AInput,
  type A2AResult,
  type A2ATaskState,
} from "./a2a.ts";
export { streamTokenBudget, charsOver4, type StreamGuard, type StreamProgress } from "./stream.ts";
