/** What every LLM effect shares: its input and result shapes, and metering with a recorded price. */
import { calcPrice } from "@pydantic/genai-prices";
import type { EffectContext } from "../runtime/flow.ts";

export const PRICE_SOURCE = "@pydantic/genai-prices 0.1.8";

export interface LlmMessage {
  role: "user" | "assistant";
  content: string;
}

export interface LlmInput {
  messages: LlmMessage[];
  system?: string;
  maxTokens?: number;
}

export interface LlmUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

export interface LlmResult {
  text: string;
  toolCalls: { id: string; name: string; input: unknown }[];
  stopReason: string | null;
  model: string;
  usage: LlmUsage;
  /** What the call cost and where the price came from (absent when the model has no price). */
  price?: { usd: number; source: string };
}

/** Meters the provider's figures and the price, and records the price with the result. */
export function finish(ectx: EffectContext, providerId: string, result: LlmResult): LlmResult {
  const u = result.usage;
  const priced = calcPrice(
    {
      input_tokens: u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens,
      output_tokens: u.outputTokens,
      cache_read_tokens: u.cacheReadTokens,
      cache_write_tokens: u.cacheWriteTokens,
    },
    result.model,
    { providerId },
  );
  const tokens = {
    input: u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens,
    output: u.outputTokens,
  };
  if (priced) {
    ectx.meter({ tokens, costUsd: priced.total_price });
    return { ...result, price: { usd: priced.total_price, source: PRICE_SOURCE } };
  }
  ectx.meter({ tokens });
  return result;
}
