/**
 * Prices of LLM calls: the effect's own `price`, else the runtime's `prices` table, else the
 * pinned price data of `@pydantic/genai-prices` (`PRICE_SOURCE`). The price used is part of the
 * step's recorded result and of its metered fact, so a replay never re-prices. Only the provider
 * effects load this module, since the price data is large (about 20 MB of heap): the root entry
 * stays small (issue 19).
 *
 * Invariants (tests cite B1..B3):
 * B1. One pricing basis for every ending of a call (issue 20): completed, cut short by an abort,
 *     a timeout or a guard, or failed midway, a call is priced as the model the provider said
 *     answered it (`message_start`, a chunk, `response.created`), else as the requested one.
 *     When nothing prices the model that answered, the requested model's price is used: the one
 *     admission found, so a call admitted under a cost budget is metered with a cost.
 * B2. What priced a cost is recorded beside it: `{ usd, source, model }` in the result, and
 *     `priced: { model, source }` in the metered delta.
 * B3. A call nothing can price is metered `costUnknown: true`, never a false zero.
 * B4. A call's reservation is priced as it would be metered (issue 20): the most it may spend in
 *     tokens, and what those cost at the requested model's price, so calls in flight together
 *     cannot pass a cost budget either.
 */
import { calcPrice } from "@pydantic/genai-prices";
import type { EffectContext } from "../effects/effect.ts";
import { costAt, priceIn, type ModelPrice, type PriceTable } from "../kernel/prices.ts";
import type { ResourceDelta } from "../kernel/resources.ts";
import {
  llmReservation,
  PRICE_SOURCE,
  type LlmInput,
  type LlmResult,
  type PriceUsed,
} from "./llm-core.ts";

export type { ModelPrice } from "../kernel/prices.ts";

/** Where a price from the effect's own `price` option is recorded as coming from. */
export const OPTION_PRICE_SOURCE = "the effect's price option";
/** Where a price from the runtime's `prices` table is recorded as coming from. */
export const RUNTIME_PRICE_SOURCE = "the runtime's prices option";

/** Tokens to price: `input` counts cache reads and writes, which the price data prices apart. */
export interface PricedTokens {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheWrite?: number;
}

/** What a metered delta records of a price (B2, B3). */
export type PriceFields = Pick<ResourceDelta, "costUsd" | "priced" | "costUnknown">;

/** How one LLM call is priced, whichever way it ends (B1). */
export class CallPricing {
  #model: string;

  constructor(
    private readonly providerId: string,
    private readonly requested: string,
    /** The effect's own price: it prices whatever model answers. */
    private readonly own: ModelPrice | undefined,
    /** The runtime's prices (`ectx.prices`). */
    private readonly table: PriceTable | undefined,
  ) {
    this.#model = requested;
  }

  /** The provider named the model that answers: every ending from now on is priced as it (B1). */
  answeredBy(model: unknown): void {
    if (typeof model === "string" && model !== "") this.#model = model;
  }

  /** The model the call is priced as: the one that answered, once the provider said. */
  get model(): string {
    return this.#model;
  }

  /** The price of `tokens` (B1), or undefined when nothing prices the call. */
  price(tokens: PricedTokens): Required<PriceUsed> | undefined {
    const answered = this.priceAs(this.#model, tokens);
    if (answered !== undefined || this.#model === this.requested) return answered;
    return this.priceAs(this.requested, tokens);
  }

  /** The price of `tokens` as a metered delta records it (B2, B3). */
  metered(tokens: PricedTokens): PriceFields {
    return priceFields(this.price(tokens));
  }

  private priceAs(model: string, tokens: PricedTokens): Required<PriceUsed> | undefined {
    const given = this.own ?? priceIn(this.table, model);
    if (given !== undefined) {
      const usd = costAt(given, tokens.input ?? 0, tokens.output ?? 0);
      return { usd, source: this.own ? OPTION_PRICE_SOURCE : RUNTIME_PRICE_SOURCE, model };
    }
    const usd = dataPrice(this.providerId, model, tokens);
    return usd === undefined ? undefined : { usd, source: PRICE_SOURCE, model };
  }
}

/** B4: what an LLM call may spend at most, in tokens and, where it can be priced, in USD. */
export function pricedReservation(
  providerId: string,
  model: string,
  own: ModelPrice | undefined,
  table: PriceTable | undefined,
  input: LlmInput,
): ResourceDelta {
  const reserved = llmReservation(input);
  const usd = new CallPricing(providerId, model, own, table).price(reserved.tokens ?? {})?.usd;
  return usd === undefined ? reserved : { ...reserved, costUsd: usd };
}

function priceFields(used: Required<PriceUsed> | undefined): PriceFields {
  if (used === undefined) return { costUnknown: true };
  return { costUsd: used.usd, priced: { model: used.model, source: used.source } };
}

/** The price data's price of `tokens` of `model`, or undefined when it has none or refuses. */
function dataPrice(providerId: string, model: string, tokens: PricedTokens): number | undefined {
  try {
    const priced = calcPrice(
      {
        input_tokens: tokens.input ?? 0,
        output_tokens: tokens.output ?? 0,
        cache_read_tokens: tokens.cacheRead ?? 0,
        cache_write_tokens: tokens.cacheWrite ?? 0,
      },
      model,
      { providerId },
    );
    return priced?.total_price;
  } catch {
    return undefined;
  }
}

/**
 * Meters the provider's figures at the call's price (B1..B3), and records the price with the
 * result; the response's GenAI attributes go on the step's span. Input tokens count cache reads
 * and writes (what is metered, and what the conventions ask for Anthropic), with the cache
 * figures beside.
 */
export function finish(ectx: EffectContext, pricing: CallPricing, result: LlmResult): LlmResult {
  const u = result.usage;
  const tokens = {
    input: u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens,
    output: u.outputTokens,
  };
  pricing.answeredBy(result.model);
  const used = pricing.price({
    ...tokens,
    cacheRead: u.cacheReadTokens,
    cacheWrite: u.cacheWriteTokens,
  });
  const estimated = result.usageEstimated === true ? { estimated: true as const } : {};
  ectx.annotate?.({
    "gen_ai.response.model": result.model,
    "gen_ai.usage.input_tokens": tokens.input,
    "gen_ai.usage.output_tokens": tokens.output,
    "gen_ai.usage.cache_read.input_tokens": u.cacheReadTokens,
    "gen_ai.usage.cache_creation.input_tokens": u.cacheWriteTokens,
    "gen_ai.response.finish_reasons": result.stopReason === null ? undefined : [result.stopReason],
    "loom.llm.usage_estimated": result.usageEstimated,
    "loom.llm.cost_usd": used?.usd,
  });
  ectx.meter({ tokens, ...priceFields(used), ...estimated });
  return used === undefined ? result : { ...result, price: used };
}

/**
 * Whether a call to `model` can be priced (issue 20): by the effect's `price`, the runtime's
 * `prices` or the price data. An LLM effect names its model as unpriced when none can, so
 * budget admission refuses it under a cost budget (PriceUnknownError) instead of letting it
 * spend an unmetered cost.
 */
export function unpricedModel(
  providerId: string,
  model: string,
  price: ModelPrice | undefined,
  prices: PriceTable | undefined,
): string | undefined {
  if (price !== undefined || priceIn(prices, model) !== undefined) return undefined;
  const key = `${providerId}\u0000${model}`;
  let known = pricedModels.get(key);
  if (known === undefined) {
    known = dataPrice(providerId, model, { input: 1000, output: 1000 }) !== undefined;
    pricedModels.set(key, known);
  }
  return known ? undefined : model;
}

/** Whether the price data prices a provider's model, asked once per model per process. */
const pricedModels = new Map<string, boolean>();
