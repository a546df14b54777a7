/**
 * What every LLM effect shares, provider aside: the messages and results, stream guards, live
 * deltas and the price source. The effects themselves are subpaths, each over its SDK as an
 * optional peer (issue 19): `loomwork/anthropic` (`anthropicEffect`), `loomwork/openai`
 * (`openAiEffect`), `loomwork/mcp` (`createToolEffect`), `loomwork/a2a` (`createA2AEffect`).
 */
export type {
  LlmEffectBase,
  LlmInput,
  LlmMessage,
  LlmResult,
  LlmTool,
  LlmToolCall,
  LlmUsage,
} from "./llm-core.ts";
export { collectStream, PRICE_SOURCE, type CollectStreamOptions } from "./llm-core.ts";
export { type LiveDelta } from "../effects/deltas.ts";
export {
  streamTokenBudget,
  charsOver4,
  estimateTokens,
  type StreamGuard,
  type StreamProgress,
  type StreamTokenBudgetOptions,
} from "./stream.ts";
