/** What every LLM effect shares: its input and result shapes, and metering with a recorded price. */
import { InvalidInputError, QuotaExceededError, TerminalError } from "../kernel/errors.ts";
import { checkedPrice } from "../kernel/prices.ts";
import type { ResourceDelta, TokenCounts } from "../kernel/resources.ts";
import { checkedTaintSource } from "../kernel/taint.ts";
import { assertPeer, importPeer } from "../peers.ts";
import type { EffectContext, LimiterClaim } from "../effects/effect.ts";
import { estimateTokens, type StreamGuard } from "./stream.ts";

export type { LlmMessage, LlmToolCall, LlmUsage, PriceUsed } from "./llm-types.ts";
import type { LlmMessage, LlmToolCall, LlmUsage, PriceUsed } from "./llm-types.ts";

export const PRICE_SOURCE = "@pydantic/genai-prices 0.1.8";

/** A tool the model may call: its name, what it does, and its input's JSON Schema. */
export interface LlmTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

export interface LlmInput {
  messages: LlmMessage[];
  system?: string;
  maxTokens?: number;
  tools?: LlmTool[];
}

export interface LlmResult {
  text: string;
  toolCalls: LlmToolCall[];
  stopReason: string | null;
  model: string;
  usage: LlmUsage;
  /** True when the provider reported no usage and `usage` is Loom's estimate. */
  usageEstimated?: true;
  /** What the call cost and what priced it (absent when nothing could price it). */
  price?: PriceUsed;
}

/** What every provider's effect options share. */
export interface LlmEffectBase {
  model: string;
  /** Stream the answer (default true); the guard needs a stream. */
  stream?: boolean;
  /** The step's name (default "llm"). */
  name?: string;
  baseURL?: string;
  apiKey?: string;
  /** Called after every delta; throw to sever (streamTokenBudget). */
  guard?: StreamGuard;
  /** Marks every answer as tainted from this source (the effect's `taintsOutput`). */
  taint?: string;
  /**
   * The model's price in USD per million tokens, for a model the pinned price data does not know:
   * under a cost budget such a model is refused (PriceUnknownError) unless this, or the runtime's
   * `prices`, prices it (issue 20). It wins over both, whatever model the provider says answered.
   */
  price?: { inputPerMTok: number; outputPerMTok: number };
  /**
   * The rate limiter its calls reserve with (the runtime's `rateLimits`, issue 26): default
   * `<provider>:<model>` ("openai:gpt-4o"); another name (one per API key, say), or `false` for
   * none.
   */
  limiter?: string | false;
}

/**
 * The SDK client, made on first use from the SDK loaded then: the SDK is an optional peer
 * (issue 19), so a missing one is refused when the effect is created, and loaded only when a
 * call is made. A client the user passed is used as it is.
 */
export function lazyClient<M, C>(
  pkg: string,
  feature: string,
  given: C | undefined,
  make: (sdk: M) => C,
): () => Promise<C> {
  if (given !== undefined) {
    const ready = Promise.resolve(given);
    return () => ready;
  }
  assertPeer(pkg, feature);
  let client: Promise<C> | undefined;
  return () =>
    (client ??= importPeer<M>(pkg, feature).then(make, (e: unknown) => {
      client = undefined;
      throw e;
    }));
}

/**
 * Refuses bad effect options at creation: a model name is needed, a guard needs a stream to
 * sever (so `stream: false` with a guard is refused), and a price is two numbers >= 0.
 */
export function checkEffectOptions(options: LlmEffectBase): void {
  if (typeof options.model !== "string" || options.model === "") {
    throw new InvalidInputError("an LLM effect needs a model name");
  }
  if (options.guard !== undefined && options.stream === false) {
    throw new InvalidInputError(
      "an LLM effect: a guard checks each delta of a stream; it cannot bound a call with stream: false",
    );
  }
  if (options.taint !== undefined) checkedTaintSource(options.taint, "an LLM effect's taint");
  const limiter = options.limiter;
  if (
    limiter !== undefined &&
    limiter !== false &&
    (typeof limiter !== "string" || limiter === "")
  ) {
    throw new InvalidInputError("an LLM effect's limiter must be a limiter's name or false");
  }
  if (options.price !== undefined) checkedPrice(options.price, "an LLM effect's price");
}

/** The output a call may stream when it names no `maxTokens` (Anthropic's request default too). */
export const DEFAULT_MAX_TOKENS = 1024;

/**
 * What one LLM call may spend at most (Effect.reserve, issue 20): its prompt at characters / 4
 * and its `maxTokens` of output (DEFAULT_MAX_TOKENS when it names none). Budget admission holds
 * it while the call runs, so parallel calls cannot together pass a token budget.
 */
export function llmReservation(input: LlmInput): ResourceDelta {
  const prompt = (input.system ?? "") + input.messages.map((m) => m.content).join("");
  return {
    tokens: { input: estimateTokens(prompt), output: input.maxTokens ?? DEFAULT_MAX_TOKENS },
  };
}

/**
 * The rate limiter an LLM call reserves with (Effect.limiter, issue 26): `<provider>:<model>` or
 * the effect's `limiter`, for its prompt's tokens and its `maxTokens` (llmReservation's).
 */
export function llmLimiterClaim(
  provider: string,
  options: LlmEffectBase,
  input: LlmInput,
): LimiterClaim | undefined {
  if (options.limiter === false) return undefined;
  const tokens = llmReservation(input).tokens;
  return {
    name: options.limiter ?? `${provider}:${options.model}`,
    inputTokens: tokens?.input ?? 0,
    outputTokens: tokens?.output ?? 0,
  };
}

/** Refuses a malformed LLM input before anything is recorded (every LLM effect's checkInput). */
export function checkLlmInput(input: LlmInput): void {
  const bad = (why: string) => new InvalidInputError(`LLM input: ${why}`);
  if (typeof input !== "object" || input === null) throw bad("expected { messages }");
  if (!Array.isArray(input.messages) || input.messages.length === 0) {
    throw bad("messages must be a non-empty array");
  }
  input.messages.forEach((m: LlmMessage, i) => {
    if (typeof m !== "object" || m === null) throw bad(`messages[${i}] is not an object`);
    if (m.role !== "user" && m.role !== "assistant" && m.role !== "tool") {
      throw bad(`messages[${i}].role must be "user", "assistant" or "tool"`);
    }
    if (typeof m.content !== "string") throw bad(`messages[${i}].content must be a string`);
    if (m.role === "tool" && (typeof m.toolCallId !== "string" || m.toolCallId === "")) {
      throw bad(`messages[${i}] (a tool result) needs the toolCallId it answers`);
    }
    if (m.role === "assistant" && m.toolCalls !== undefined) {
      if (!Array.isArray(m.toolCalls)) throw bad(`messages[${i}].toolCalls must be an array`);
      m.toolCalls.forEach((c: LlmToolCall, j) => {
        if (typeof c?.id !== "string" || typeof c.name !== "string" || c.name === "") {
          throw bad(`messages[${i}].toolCalls[${j}] needs a string id and name`);
        }
      });
    }
  });
  if (input.system !== undefined && typeof input.system !== "string") {
    throw bad("system must be a string");
  }
  if (
    input.maxTokens !== undefined &&
    (!Number.isInteger(input.maxTokens) || input.maxTokens <= 0)
  ) {
    throw bad("maxTokens must be a positive integer");
  }
  if (input.tools !== undefined) {
    if (!Array.isArray(input.tools)) throw bad("tools must be an array");
    input.tools.forEach((t: LlmTool, i) => {
      if (typeof t?.name !== "string" || t.name === "") throw bad(`tools[${i}] needs a name`);
      if (typeof t.inputSchema !== "object" || t.inputSchema === null) {
        throw bad(`tools[${i}] ("${t.name}") needs an inputSchema (a JSON Schema object)`);
      }
    });
  }
}

/** Parses a tool call's streamed JSON arguments ({} when empty; kept raw when malformed). */
export function parseArguments(json: string): unknown {
  if (json === "") return {};
  try {
    return JSON.parse(json) as unknown;
  } catch {
    return { unparsed: json };
  }
}

/**
 * Puts the request's GenAI attributes on the step's trace span, when it records (docs/tracing.md):
 * every LLM effect calls it before the provider call. `gen_ai.system` is the name the
 * conventions used before `gen_ai.provider.name` (semconv 1.37); both are set, for older backends.
 */
export function annotateRequest(
  ectx: EffectContext,
  providerId: string,
  model: string,
  input: LlmInput,
): void {
  ectx.annotate?.({
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": providerId,
    "gen_ai.system": providerId,
    "gen_ai.request.model": model,
    "gen_ai.request.max_tokens": input.maxTokens,
  });
}

/**
 * What a streamed call's cost is priced by (providers/pricing.ts CallPricing): the same pricer
 * prices the call however it ends, so a call cut short is priced as a completed one would be.
 */
export interface StreamPricing {
  /** `costUsd` and what priced it, or `costUnknown` when nothing can. */
  metered(tokens: TokenCounts): Pick<ResourceDelta, "costUsd" | "priced" | "costUnknown">;
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
    /** Prices an estimate of tokens (the call's pricing); none for a stream of one's own. */
    private readonly pricing?: StreamPricing,
  ) {
    // Cut short by a cancel or a timeout before it can meter, the call has still cost this much.
    ectx.provisional?.(() => this.soFar());
  }

  /** The latest input figure the call knows (the provider's, or the prompt estimate). */
  private inputTokens = 0;

  /** What the call has cost so far, as an estimate: input, and the text's characters / 4. */
  private soFar(): ResourceDelta | undefined {
    const tokens = { input: this.inputTokens, output: estimateTokens(this.text) };
    if (tokens.input === 0 && tokens.output === 0) return undefined;
    return { tokens, ...this.pricing?.metered(tokens), estimated: true };
  }

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
    // A delta that arrives after an abort is not judged: the abort's reason stands.
    if (this.controller.signal.aborted) return false;
    this.text += text;
    this.inputTokens = inputTokens;
    this.ectx.publishDelta?.(text);
    try {
      this.guard?.({ text: this.text, delta: text, inputTokens, ectx: this.ectx });
      return true;
    } catch (e) {
      // A quota breach is rethrown untouched (A8); a guard that broke (a tokenizer bug) is
      // terminal: retrying would only pay for the same partial stream again.
      this.severed =
        e instanceof QuotaExceededError
          ? e
          : new TerminalError(
              `the stream guard of step "${this.ectx.stepId}" failed: ${toError(e).message}`,
            );
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
    if (known) {
      // What is known goes on the step's span too, as an estimate (docs/tracing.md).
      this.ectx.annotate?.({
        "gen_ai.usage.input_tokens": known.input,
        "gen_ai.usage.output_tokens": known.output,
        "loom.llm.usage_estimated": true,
      });
      // Priced as a completed call is, so a cost budget sees severed and failed attempts.
      this.ectx.meter({ tokens: known, ...this.pricing?.metered(known), estimated: true });
    }
    const r: unknown = this.controller.signal.reason;
    throw (
      this.failure ?? this.severed ?? (r instanceof Error ? r : new Error(`aborted: ${String(r)}`))
    );
  }
}

export interface CollectStreamOptions {
  /** Called after every delta with the text so far; throw to sever (streamTokenBudget). */
  guard?: StreamGuard;
  /** The call's input tokens as known before it streams (the guard counts them). */
  inputTokens?: number;
}

/**
 * Consumes a provider's stream of text deltas inside an effect: `open` gets the signal to pass to
 * the provider's request. After every delta the text so far is published live and the guard runs;
 * a guard that throws severs the request through that signal and its error is rethrown untouched.
 * A stream cut short (severed, cancelled, failed midway) is metered as an estimate (input, and
 * the text so far at characters / 4) before the reason is rethrown. Returns the whole text; a
 * call that ran to its end meters its own usage (the provider's figures).
 */
export async function collectStream(
  ectx: EffectContext,
  open: (signal: AbortSignal) => AsyncIterable<string> | Promise<AsyncIterable<string>>,
  options: CollectStreamOptions = {},
): Promise<string> {
  const call = new StreamSession(ectx, options.guard);
  const input = options.inputTokens ?? 0;
  await call.consume(async () => {
    for await (const delta of await open(call.signal)) {
      if (!call.delta(delta, input)) break;
    }
  });
  call.throwIfCutShort((failed) =>
    failed && call.text === "" ? undefined : { input, output: estimateTokens(call.text) },
  );
  return call.text;
}

function toError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
