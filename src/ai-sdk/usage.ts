/**
 * What a durable model call spends, in Loom's terms (model.ts): its provider and model for the
 * pricing the native effects use (providers/pricing.ts), what it may spend at most (its
 * reservation), and the provider's usage as Loom meters it.
 *
 * Invariants (tests cite AU1..AU3):
 * AU1. A call is priced as `<provider>`'s model, the provider being the option's, else the AI SDK
 *      model's `provider` up to its first dot ("openai.chat" is openai's): the same price data,
 *      table and option as the native effects, so the same response costs the same.
 * AU2. Usage maps as the native effects map their provider's: input tokens are those read
 *      neither from nor into the cache (`noCache`, else the total less both), beside the cache
 *      reads and writes; output is the total. A call whose usage reports no token count is
 *      metered from Loom's estimate (`estimateTokens` of the prompt and the text) and marked so.
 * AU3. A call reserves its prompt's `estimateTokens` and its `maxOutputTokens`
 *      (DEFAULT_MAX_TOKENS when it names none), priced as it would be metered.
 */
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4Prompt,
  LanguageModelV4Usage,
} from "@ai-sdk/provider";
import type { ModelPrice, PriceTable } from "../kernel/prices.ts";
import type { ResourceDelta } from "../kernel/resources.ts";
import { DEFAULT_MAX_TOKENS, type LlmUsage } from "../providers/llm-core.ts";
import { CallPricing } from "../providers/pricing.ts";
import { estimateTokens } from "../providers/stream.ts";

/** AU1 */
export function providerIdOf(modelProvider: string, option: string | undefined): string {
  return option ?? modelProvider.split(".")[0] ?? modelProvider;
}

/** A prompt's text (its system text, text parts, tool calls and results), for the estimate. */
function promptText(prompt: LanguageModelV4Prompt): string {
  const texts: string[] = [];
  for (const m of prompt) {
    if (typeof m.content === "string") {
      texts.push(m.content);
      continue;
    }
    for (const part of m.content) {
      if ("text" in part && typeof part.text === "string") texts.push(part.text);
      else if (part.type === "tool-call") texts.push(JSON.stringify(part.input ?? null));
      else if (part.type === "tool-result") texts.push(JSON.stringify(part.output ?? null));
    }
  }
  return texts.join("");
}

/** AU2, AU3: the prompt's tokens as Loom estimates them (providers/stream.ts). */
export function promptTokens(prompt: LanguageModelV4Prompt): number {
  return estimateTokens(promptText(prompt));
}

/** AU3 */
export function reservationOf(
  options: LanguageModelV4CallOptions,
  providerId: string,
  model: string,
  own: ModelPrice | undefined,
  table: PriceTable | undefined,
): ResourceDelta {
  const tokens = {
    input: promptTokens(options.prompt),
    output: options.maxOutputTokens ?? DEFAULT_MAX_TOKENS,
  };
  const usd = new CallPricing(providerId, model, own, table).price(tokens)?.usd;
  return usd === undefined ? { tokens } : { tokens, costUsd: usd };
}

/** AU2: the provider's usage as Loom meters it, or undefined when it reports no count. */
export function usageOf(usage: LanguageModelV4Usage | undefined): LlmUsage | undefined {
  if (usage === undefined) return undefined;
  const input = usage.inputTokens;
  const output = usage.outputTokens.total;
  if (input.total === undefined && input.noCache === undefined && output === undefined) {
    return undefined;
  }
  const cacheReadTokens = input.cacheRead ?? 0;
  const cacheWriteTokens = input.cacheWrite ?? 0;
  return {
    inputTokens:
      input.noCache ?? Math.max(0, (input.total ?? 0) - cacheReadTokens - cacheWriteTokens),
    outputTokens: output ?? 0,
    cacheReadTokens,
    cacheWriteTokens,
  };
}

/** AU2: Loom's estimate of a call that reported no usage. */
export function estimatedUsage(options: LanguageModelV4CallOptions, text: string): LlmUsage {
  return {
    inputTokens: promptTokens(options.prompt),
    outputTokens: estimateTokens(text),
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  };
}
