/** What every LLM effect shares: its input and result shapes, and metering with a recorded price. */
import { calcPrice } from "@pydantic/genai-prices";
import type { TokenCounts } from "../kernel/resources.ts";
import type { EffectContext } from "../runtime/flow.ts";
import { publishDelta } from "./deltas.ts";
import type { StreamGuard } from "./stream.ts";

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

/**
 * What every streamed LLM call shares: an abort controller that the step's signal forwards to
 * and a severing guard aborts; the text so far, published live and checked by the guard after
 * every delta; and, when the call is cut short (severed, aborted, or failed midway), metering
 * what is known as an estimate before the reason is rethrown.
 */
export class StreamSession {
  readonly controller = new AbortController();
  text = "";
  private severed: Error | undefined;
  private failure: Error | undefined;

  constructor(
    private readonly ectx: EffectContext,
    private readonly guard: StreamGuard | undefined,
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Runs the provider call and its loop with the step's signal forwarded. */
  async consume(loop: () => Promise<void>): Promise<void> {
    const forward = () => this.controller.abort(this.ectx.signal.reason);
    if (this.ectx.signal.aborted) forward();
    this.ectx.signal.addEventListener("abort", forward, { once: true });
    try {
      await loop();
    } catch (e) {
      // A stream that fails midway (an error event, a dropped connection) is metered too.
      if (!this.controller.signal.aborted) this.failure = toError(e);
    } finally {
      this.ectx.signal.removeEventListener("abort", forward);
    }
  }

  /** Adds a text delta: published live, then checked by the guard; false once it severed. */
  delta(text: string, inputTokens: number): boolean {
    this.text += text;
    publishDelta(this.ectx.executionId, { stepId: this.ectx.stepId, text });
    try {
      this.guard?.({ text: this.text, inputTokens, ectx: this.ectx });
      return true;
    } catch (e) {
      this.severed = toError(e);
      this.controller.abort(this.severed);
      return false;
    }
  }

  /**
   * Returns when the call ran to its end; otherwise meters what `tokens` says is known (nothing
   * when it says undefined: no false zeros), marked as an estimate, and throws why it ended.
   */
  throwIfCutShort(tokens: (failed: boolean) => TokenCounts | undefined): void {
    if (!this.failure && !this.severed && !this.controller.signal.aborted) return;
    const known = tokens(this.failure !== undefined);
    if (known) this.ectx.meter({ tokens: known, estimated: true });
    const r: unknown = this.controller.signal.reason;
    throw (
      this.failure ?? this.severed ?? (r instanceof Error ? r : new Error(`aborted: ${String(r)}`))
    );
  }
}

function toError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
