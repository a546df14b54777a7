/**
 * Consuming a provider's stream with a guard (ADR 0020 K8.4, A8): `collectStream` calls the guard
 * after every delta; `streamTokenBudget` is the guard that severs a streaming call whose output,
 * estimated from the text so far, would take the execution past its token budget.
 *
 * The estimate is named as one: in the guard's type, in the error's details and in the
 * QUOTA_EXCEEDED fact (`estimated: true`). Enforcement is as fine as the delta rate: a provider
 * that streams one enormous chunk gets one check.
 */
import { QuotaExceededError } from "../kernel/errors.ts";
import type { EffectContext } from "../effects/effect.ts";

/** What a guard sees after each delta. */
export interface StreamProgress {
  /** The text so far. */
  text: string;
  /** The delta just added (the end of `text`). */
  delta: string;
  /** Input tokens the provider reported for this call (0 until it has). */
  inputTokens: number;
  ectx: EffectContext;
}

/** Throws to sever the stream; the error is rethrown to the flow untouched. */
export type StreamGuard = (progress: StreamProgress) => void;

export interface StreamTokenBudgetOptions {
  /**
   * Counts the tokens of one delta (a real tokenizer, say); the guard sums them, so each delta
   * is counted once, however long the stream. Default: `estimateTokens` of the whole text.
   */
  estimate?: (text: string) => number;
}

/** Characters / 4: the usual ratio for English text (kept for callers of its name). */
export const charsOver4 = (text: string): number => Math.ceil(text.length / 4);

/**
 * Loom's token estimate where a provider has not said (a reservation's prompt, a stream's text so
 * far): ASCII characters at 4 to a token, and every other character one token. Characters / 4
 * alone undercounts text that is not English: a CJK character is about one token, and 8 calls of
 * 4,000 CJK characters, estimated at 1,000 tokens each, reached a provider that counted 4,000
 * (the red team's run against `inputTpm`).
 */
export function estimateTokens(text: string): number {
  let ascii = 0;
  let other = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) ascii++;
    else if (c < 0xdc00 || c > 0xdfff) other++; // a low surrogate's pair was counted once
  }
  return Math.ceil(ascii / 4) + other;
}

/**
 * A guard that severs the call once what the execution already spent (`ectx.resources`), plus
 * this call's input, plus its output estimated from the text so far, passes `budget` tokens.
 */
export function streamTokenBudget(
  budget: number,
  options: StreamTokenBudgetOptions = {},
): StreamGuard {
  if (typeof budget !== "number" || !Number.isFinite(budget) || budget < 0) {
    throw new QuotaExceededError("streamTokenBudget needs a finite number of tokens >= 0");
  }
  const estimate = options.estimate;
  // Per stream (a guard may serve several calls): its running count, keyed by its step.
  const counted = new WeakMap<object, number>();
  return ({ text, delta, inputTokens, ectx }) => {
    const spent = (ectx.resources.tokens?.input ?? 0) + (ectx.resources.tokens?.output ?? 0);
    let output: number;
    if (estimate === undefined) {
      output = estimateTokens(text);
    } else {
      // A stream's first delta is its whole text: a new stream (or a retried attempt) counts anew.
      const before = text.length === delta.length ? 0 : (counted.get(ectx) ?? 0);
      output = before + estimate(delta);
      counted.set(ectx, output);
    }
    const projected = spent + inputTokens + output;
    if (projected <= budget) return;
    throw new QuotaExceededError(
      `step "${ectx.stepId}" was severed mid-stream: about ${projected} tokens (an estimate from the text so far) would pass the budget of ${budget}`,
      { dimension: "tokens", budget: "stream", estimated: true, projected, limit: budget },
    );
  };
}
