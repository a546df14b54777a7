/**
 * `anthropicEffect({ model, ... })` from `loomwork/anthropic`: a Messages API call through the official SDK
 * (`@anthropic-ai/sdk`) as a Loom effect.
 *
 * - The SDK's own retries are off (`maxRetries: 0`): Loom's retry middleware owns every attempt,
 *   and each is in the log.
 * - The step's signal is forwarded. An abort while iterating a stream ends the SDK's loop without
 *   an error, so the signal is checked after the loop.
 * - Usage is what the provider reports: input and cache tokens at `message_start`, the cumulative
 *   `output_tokens` of `message_delta` (overwritten, never added). A stream cut short is metered
 *   with its output estimated from the text so far, marked as an estimate.
 * - Cost is the effect's `price`, else the runtime's `prices`, else the pinned price data of
 *   `@pydantic/genai-prices`, for the model `message_start` names however the call ends
 *   (pricing.ts B1); the price used is part of the step's recorded result, so a replay never
 *   re-prices.
 * - The step records the final result (text, tool calls, usage, stop reason, price), not deltas.
 */
import type Anthropic from "@anthropic-ai/sdk";
import type { Effect, EffectContext, TaintingEffect } from "../effects/effect.ts";
import { estimateTokens } from "./stream.ts";
import { CallPricing, finish, pricedReservation, unpricedModel } from "./pricing.ts";
import {
  annotateRequest,
  checkEffectOptions,
  llmLimiterClaim,
  checkLlmInput,
  DEFAULT_MAX_TOKENS,
  lazyClient,
  parseArguments,
  StreamSession,
  type LlmEffectBase,
  type LlmInput,
  type LlmResult,
  type LlmUsage,
} from "./llm-core.ts";

export interface AnthropicEffectOptions extends LlmEffectBase {
  /** Optional: the effect is anthropic's by the subpath it comes from. */
  provider?: "anthropic";
  /** A client of your own; Loom still passes `maxRetries: 0` and the signal with every call. */
  client?: Anthropic;
}

/**
 * An LLM call as an effect: `ctx.execute(llm, { messages })`. `@anthropic-ai/sdk` is an optional peer:
 * without it, this throws MissingDependencyError naming it. With `taint`, every answer is a
 * taint wrapper (`Tainted<LlmResult>`).
 */
export function anthropicEffect(
  options: AnthropicEffectOptions & { taint: string },
): TaintingEffect<LlmInput, LlmResult>;
export function anthropicEffect(options: AnthropicEffectOptions): Effect<LlmInput, LlmResult>;
export function anthropicEffect(options: AnthropicEffectOptions): Effect<LlmInput, LlmResult> {
  checkEffectOptions(options);
  const apiKey = options.apiKey ?? process.env.ANTHROPIC_API_KEY ?? "none";
  const clientOf = lazyClient(
    "@anthropic-ai/sdk",
    "loomwork/anthropic",
    options.client,
    (sdk: typeof import("@anthropic-ai/sdk")) =>
      new sdk.default({
        apiKey,
        maxRetries: 0,
        ...(options.baseURL ? { baseURL: options.baseURL } : {}),
      }),
  );
  return {
    name: options.name ?? "llm",
    checkInput: checkLlmInput,
    reserve: (input, prices) =>
      pricedReservation("anthropic", options.model, options.price, prices, input),
    unpriced: (_input, prices) => unpricedModel("anthropic", options.model, options.price, prices),
    limiter: (input) => llmLimiterClaim("anthropic", options, input),
    ...(options.taint === undefined ? {} : { taintsOutput: options.taint }),
    run: async (input, ectx) => {
      annotateRequest(ectx, "anthropic", options.model, input);
      const client = await clientOf();
      const pricing = new CallPricing("anthropic", options.model, options.price, ectx.prices);
      return options.stream === false
        ? once(client, options, input, ectx, pricing)
        : streamed(client, options, input, ectx, pricing);
    },
  };
}

function params(options: AnthropicEffectOptions, input: LlmInput) {
  return {
    model: options.model,
    max_tokens: input.maxTokens ?? DEFAULT_MAX_TOKENS,
    messages: messages(input),
    ...(input.system === undefined ? {} : { system: input.system }),
    ...(input.tools === undefined
      ? {}
      : {
          tools: input.tools.map((t) => ({
            name: t.name,
            ...(t.description === undefined ? {} : { description: t.description }),
            input_schema: { ...t.inputSchema, type: "object" as const },
          })),
        }),
  };
}

/**
 * Loom's turns in Anthropic's form: an assistant's tool calls become `tool_use` blocks, and
 * tool results become `tool_result` blocks of one user turn (consecutive results share it).
 */
function messages(input: LlmInput): Anthropic.MessageParam[] {
  const out: Anthropic.MessageParam[] = [];
  for (const m of input.messages) {
    if (m.role === "tool") {
      const block: Anthropic.ToolResultBlockParam = {
        type: "tool_result",
        tool_use_id: m.toolCallId,
        content: m.content,
      };
      const last = out.at(-1);
      if (last?.role === "user" && Array.isArray(last.content)) last.content.push(block);
      else out.push({ role: "user", content: [block] });
    } else if (m.role === "assistant" && m.toolCalls?.length) {
      out.push({
        role: "assistant",
        content: [
          ...(m.content === "" ? [] : [{ type: "text" as const, text: m.content }]),
          ...m.toolCalls.map((c) => ({
            type: "tool_use" as const,
            id: c.id,
            name: c.name,
            input: c.input,
          })),
        ],
      });
    } else {
      out.push({ role: m.role, content: m.content });
    }
  }
  return out;
}

async function once(
  client: Anthropic,
  options: AnthropicEffectOptions,
  input: LlmInput,
  ectx: EffectContext,
  pricing: CallPricing,
): Promise<LlmResult> {
  const message = await client.messages.create(
    { ...params(options, input), stream: false },
    { signal: ectx.signal, maxRetries: 0 },
  );
  const usage: LlmUsage = {
    inputTokens: message.usage.input_tokens,
    outputTokens: message.usage.output_tokens,
    cacheReadTokens: message.usage.cache_read_input_tokens ?? 0,
    cacheWriteTokens: message.usage.cache_creation_input_tokens ?? 0,
  };
  let text = "";
  const toolCalls: LlmResult["toolCalls"] = [];
  for (const block of message.content) {
    if (block.type === "text") text += block.text;
    if (block.type === "tool_use")
      toolCalls.push({ id: block.id, name: block.name, input: block.input });
  }
  return finish(ectx, pricing, {
    text,
    toolCalls,
    stopReason: message.stop_reason,
    model: message.model,
    usage,
  });
}

async function streamed(
  client: Anthropic,
  options: AnthropicEffectOptions,
  input: LlmInput,
  ectx: EffectContext,
  pricing: CallPricing,
): Promise<LlmResult> {
  const call = new StreamSession(ectx, options.guard, pricing);
  const usage: LlmUsage = {
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  };
  let model = options.model;
  let stopReason: string | null = null;
  let reportedOutput = false;
  const tools = new Map<number, { id: string; name: string; json: string }>();
  await call.consume(async () => {
    const stream = await client.messages.create(
      { ...params(options, input), stream: true },
      { signal: call.signal, maxRetries: 0 },
    );
    for await (const event of stream) {
      if (event.type === "message_start") {
        const u = event.message.usage;
        usage.inputTokens = u.input_tokens;
        usage.cacheReadTokens = u.cache_read_input_tokens ?? 0;
        usage.cacheWriteTokens = u.cache_creation_input_tokens ?? 0;
        model = event.message.model;
        pricing.answeredBy(model); // B1: from here on, however the call ends
      } else if (event.type === "content_block_start" && event.content_block.type === "tool_use") {
        const b = event.content_block;
        tools.set(event.index, { id: b.id, name: b.name, json: "" });
      } else if (event.type === "content_block_delta") {
        if (event.delta.type === "text_delta") {
          const input = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;
          if (!call.delta(event.delta.text, input)) break;
        } else if (event.delta.type === "input_json_delta") {
          const tool = tools.get(event.index);
          if (tool) tool.json += event.delta.partial_json;
        }
      } else if (event.type === "message_delta") {
        stopReason = event.delta.stop_reason;
        // Cumulative: overwrite, never add (input and cache figures too, when it has them).
        const u = event.usage;
        usage.outputTokens = u.output_tokens;
        if (typeof u.input_tokens === "number") usage.inputTokens = u.input_tokens;
        if (typeof u.cache_read_input_tokens === "number")
          usage.cacheReadTokens = u.cache_read_input_tokens;
        if (typeof u.cache_creation_input_tokens === "number") {
          usage.cacheWriteTokens = u.cache_creation_input_tokens;
        }
        reportedOutput = true;
      }
    }
  });
  // Cut short: the provider reported no final usage; what is known, the rest estimated
  // (nothing, when the call never got as far as its first event: no false zeros).
  call.throwIfCutShort(() => {
    const output = reportedOutput ? usage.outputTokens : estimateTokens(call.text);
    const input = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;
    return input > 0 || output > 0 ? { input, output } : undefined;
  });
  const text = call.text;
  const toolCalls = [...tools.values()].map((t) => ({
    id: t.id,
    name: t.name,
    input: parseArguments(t.json),
  }));
  return finish(ectx, pricing, { text, toolCalls, stopReason, model, usage });
}
