/**
 * Prices of LLM calls, from the pinned price data of `@pydantic/genai-prices` (`PRICE_SOURCE`):
 * the price used is part of the step's recorded result, so a replay never re-prices. Only the
 * provider effects load this module, since the price data is large (about 20 MB of heap): the
 * root entry stays small (issue 19).
 */
import { calcPrice } from "@pydantic/genai-prices";
import type { EffectContext } from "../effects/effect.ts";
import type { TokenCounts } from "../kernel/resources.ts";
import { PRICE_SOURCE, type LlmResult } from "./llm-core.ts";

/** A price per million tokens the user supplies for a model the price data does not know. */
export interface ModelPrice {
  inputPerMTok: number;
  outputPerMTok: number;
}

/** Where a user-supplied price is recorded as coming from. */
export const OPTION_PRICE_SOURCE = "the effect's price option";

const byPrice = (price: ModelPrice, input: number, output: number): number =>
  (input * price.inputPerMTok + output * price.outputPerMTok) / 1_000_000;

/** A pricer of estimated tokens for `model` (undefined when it has no known price). */
export function estimatePrice(
  providerId: string,
  model: string,
  price?: ModelPrice,
): (tokens: TokenCounts) => number | undefined {
  return (tokens) => {
    if (price) return byPrice(price, tokens.input ?? 0, tokens.output ?? 0);
    try {
      const priced = calcPrice(
        { input_tokens: tokens.input ?? 0, output_tokens: tokens.output ?? 0 },
        model,
        { providerId },
      );
      return priced?.total_price;
    } catch {
      return undefined;
    }
  };
}

/**
 * Meters the provider's figures and the price, and records the price with the result; the
 * response's GenAI attributes go on the step's span. Input tokens count cache reads and writes
 * (what is metered, and what the conventions ask for Anthropic), with the cache figures beside.
 */
export function finish(
  ectx: EffectContext,
  providerId: string,
  result: LlmResult,
  price?: ModelPrice,
): LlmResult {
  const u = result.usage;
  const inputTokens = u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  if (price) {
    const usd = byPrice(price, inputTokens, u.outputTokens);
    const estimated = result.usageEstimated === true ? { estimated: true as const } : {};
    ectx.meter({
      tokens: { input: inputTokens, output: u.outputTokens },
      costUsd: usd,
      ...estimated,
    });
    return { ...result, price: { usd, source: OPTION_PRICE_SOURCE } };
  }
  const priced = safePrice(() =>
    calcPrice(
      {
        input_tokens: u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens,
        output_tokens: u.outputTokens,
        cache_read_tokens: u.cacheReadTokens,
        cache_write_tokens: u.cacheWriteTokens,
      },
      result.model,
      { providerId },
    ),
  );
  const tokens = {
    input: u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens,
    output: u.outputTokens,
  };
  const estimated = result.usageEstimated === true ? { estimated: true as const } : {};
  ectx.annotate?.({
    "gen_ai.response.model": result.model,
    "gen_ai.usage.input_tokens": tokens.input,
    "gen_ai.usage.output_tokens": tokens.output,
    "gen_ai.usage.cache_read.input_tokens": u.cacheReadTokens,
    "gen_ai.usage.cache_creation.input_tokens": u.cacheWriteTokens,
    "gen_ai.response.finish_reasons": result.stopReason === null ? undefined : [result.stopReason],
    "loom.llm.usage_estimated": result.usageEstimated,
    "loom.llm.cost_usd": priced?.total_price,
  });
  if (priced) {
    ectx.meter({ tokens, costUsd: priced.total_price, ...estimated });
    return { ...result, price: { usd: priced.total_price, source: PRICE_SOURCE } };
  }
  ectx.meter({ tokens, ...estimated });
  return result;
}

/** A price, or none when the price data refuses the figures (the call is metered anyway). */
function safePrice<T>(price: () => T): T | undefined {
  try {
    return price();
  } catch {
    return undefined;
  }
}

/**
 * Whether a call to `model` can be priced (issue 20): by the user's `price`, or by the price
 * data. An LLM effect names its model as unpriced when neither can, so budget admission refuses
 * it under a cost budget (PriceUnknownError) instead of letting it spend an unmetered cost.
 */
export function unpricedModel(
  providerId: string,
  model: string,
  price: ModelPrice | undefined,
): string | undefined {
  if (price) return undefined;
  const key = `${providerId}\u0000${model}`;
  let known = pricedModels.get(key);
  if (known === undefined) {
    known = estimatePrice(providerId, model)({ input: 1000, output: 1000 }) !== undefined;
    pricedModels.set(key, known);
  }
  return known ? undefined : model;
}

/** Whether the price data prices a provider's model, asked once per model per process. */
const pricedModels = new Map<string, boolean>();
