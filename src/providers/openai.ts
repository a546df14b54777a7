/**
 * `openAiEffect({ model, ... })` from `loomwork/openai`: a Chat Completions call through the official
 * SDK (`openai`) as a Loom effect, under the same rules as the Anthropic one (anthropic.ts): the
 * SDK's retries off, the step's signal forwarded (checked after the stream's loop, which an abort
 * ends silently), usage as the provider reports it, priced as the model the stream's first chunk
 * (or `response.created`) names however the call ends (pricing.ts B1), and recorded.
 *
 * A stream asks for its trailing usage chunk (`stream_options.include_usage`). A stream cut short
 * never gets it: its usage is Loom's estimate (input from the prompt's characters, output from the
 * text so far), metered and marked as an estimate. Cached prompt tokens count as input read from
 * cache. `api: "responses"` uses the Responses API instead, streaming or not: a stream's usage and
 * tool calls come on `response.completed`, so a cut-short call is metered from estimates the same
 * way.
 */
import type OpenAI from "openai";
import { InvalidInputError } from "../kernel/errors.ts";
import type { Effect, EffectContext, TaintingEffect } from "../effects/effect.ts";
import { CallPricing, finish, pricedReservation, unpricedModel } from "./pricing.ts";
import {
  DEFAULT_MAX_TOKENS,
  annotateRequest,
  checkEffectOptions,
  llmLimiterClaim,
  checkLlmInput,
  lazyClient,
  parseArguments,
  StreamSession,
  type LlmEffectBase,
  type LlmInput,
  type LlmResult,
  type LlmToolCall,
  type LlmUsage,
} from "./llm-core.ts";
import { estimateTokens } from "./stream.ts";

export interface OpenAiEffectOptions extends LlmEffectBase {
  /** Optional: the effect is openai's by the subpath it comes from. */
  provider?: "openai";
  /** Chat Completions (default) or the Responses API. */
  api?: "chat" | "responses";
  /** A client of your own; Loom still passes `maxRetries: 0` and the signal with every call. */
  client?: OpenAI;
  /** Must include `/v1`. */
  baseURL?: string;
}

/**
 * An LLM call as an effect: `ctx.execute(llm, { messages })`. `openai` is an optional peer:
 * without it, this throws MissingDependencyError naming it. With `taint`, every answer is a
 * taint wrapper (`Tainted<LlmResult>`).
 */
export function openAiEffect(
  options: OpenAiEffectOptions & { taint: string },
): TaintingEffect<LlmInput, LlmResult>;
export function openAiEffect(options: OpenAiEffectOptions): Effect<LlmInput, LlmResult>;
export function openAiEffect(options: OpenAiEffectOptions): Effect<LlmInput, LlmResult> {
  checkEffectOptions(options);
  if (options.api !== undefined && options.api !== "chat" && options.api !== "responses") {
    throw new InvalidInputError(
      `openAiEffect: unknown OpenAI api ${JSON.stringify(options.api)} (known: chat, responses)`,
    );
  }
  const apiKey = options.apiKey ?? process.env.OPENAI_API_KEY ?? "none";
  const clientOf = lazyClient(
    "openai",
    "loomwork/openai",
    options.client,
    (sdk: typeof import("openai")) =>
      new sdk.default({
        apiKey,
        maxRetries: 0,
        ...(options.baseURL ? { baseURL: options.baseURL } : {}),
      }),
  );
  const responses = options.api === "responses";
  return {
    name: options.name ?? "llm",
    checkInput: checkLlmInput,
    reserve: (input, prices) =>
      pricedReservation("openai", options.model, options.price, prices, input),
    unpriced: (_input, prices) => unpricedModel("openai", options.model, options.price, prices),
    limiter: (input) => llmLimiterClaim("openai", options, input),
    ...(options.taint === undefined ? {} : { taintsOutput: options.taint }),
    run: async (input, ectx) => {
      annotateRequest(ectx, "openai", options.model, input);
      const client = await clientOf();
      const pricing = new CallPricing("openai", options.model, options.price, ectx.prices);
      return options.stream === false
        ? (responses ? responsesOnce : chatOnce)(client, options, input, ectx, pricing)
        : (responses ? responsesStreamed : chatStreamed)(client, options, input, ectx, pricing);
    },
  };
}

// --- Chat Completions ---

function chatParams(options: OpenAiEffectOptions, input: LlmInput) {
  const system: OpenAI.ChatCompletionMessageParam[] =
    input.system === undefined ? [] : [{ role: "system", content: input.system }];
  const turns = input.messages.map((m): OpenAI.ChatCompletionMessageParam => {
    if (m.role === "tool") return { role: "tool", tool_call_id: m.toolCallId, content: m.content };
    if (m.role === "assistant" && m.toolCalls?.length) {
      return {
        role: "assistant",
        content: m.content === "" ? null : m.content,
        tool_calls: m.toolCalls.map((c) => ({
          id: c.id,
          type: "function" as const,
          function: { name: c.name, arguments: JSON.stringify(c.input ?? {}) },
        })),
      };
    }
    return { role: m.role, content: m.content };
  });
  return {
    model: options.model,
    messages: [...system, ...turns],
    // The call's reservation (budgets, rate limits) holds its maxTokens: a request without one
    // could stream past what was reserved for it, so it asks for at most what was reserved.
    max_completion_tokens: input.maxTokens ?? DEFAULT_MAX_TOKENS,
    ...(input.tools === undefined
      ? {}
      : {
          tools: input.tools.map((t) => ({
            type: "function" as const,
            function: {
              name: t.name,
              parameters: t.inputSchema,
              ...(t.description === undefined ? {} : { description: t.description }),
            },
          })),
        }),
  };
}

function chatUsage(u: OpenAI.CompletionUsage): LlmUsage {
  const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
  const written = u.prompt_tokens_details?.cache_write_tokens ?? 0;
  return {
    inputTokens: u.prompt_tokens - cached - written,
    outputTokens: u.completion_tokens,
    cacheReadTokens: cached,
    cacheWriteTokens: written,
  };
}

async function chatOnce(
  client: OpenAI,
  options: OpenAiEffectOptions,
  input: LlmInput,
  ectx: EffectContext,
  pricing: CallPricing,
): Promise<LlmResult> {
  const completion = await client.chat.completions.create(
    { ...chatParams(options, input), stream: false },
    { signal: ectx.signal, maxRetries: 0 },
  );
  const choice = completion.choices[0];
  return finish(ectx, pricing, {
    text: choice?.message.content ?? "",
    toolCalls: (choice?.message.tool_calls ?? []).flatMap((t) =>
      t.type === "function"
        ? [{ id: t.id, name: t.function.name, input: parseArguments(t.function.arguments) }]
        : [],
    ),
    stopReason: choice?.finish_reason ?? null,
    model: completion.model,
    ...usageOr(
      completion.usage ? chatUsage(completion.usage) : undefined,
      input,
      choice?.message.content,
    ),
  });
}

async function chatStreamed(
  client: OpenAI,
  options: OpenAiEffectOptions,
  input: LlmInput,
  ectx: EffectContext,
  pricing: CallPricing,
): Promise<LlmResult> {
  const call = new StreamSession(ectx, options.guard, pricing);
  // Until the provider reports usage, the prompt's size is the input estimate.
  const promptEstimate = promptTokensEstimate(input);
  let stopReason: string | null = null;
  let usage: LlmUsage | undefined;
  const tools = new Map<number, { id: string; name: string; json: string }>();
  await call.consume(async () => {
    const stream = await client.chat.completions.create(
      { ...chatParams(options, input), stream: true, stream_options: { include_usage: true } },
      { signal: call.signal, maxRetries: 0 },
    );
    for await (const chunk of stream) {
      pricing.answeredBy(chunk.model); // B1: from the first chunk, however the call ends
      if (chunk.usage) usage = chatUsage(chunk.usage);
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.finish_reason) stopReason = choice.finish_reason;
      for (const t of choice.delta.tool_calls ?? []) {
        const tool = tools.get(t.index) ?? { id: "", name: "", json: "" };
        if (t.id) tool.id = t.id;
        if (t.function?.name) tool.name = t.function.name;
        tool.json += t.function?.arguments ?? "";
        tools.set(t.index, tool);
      }
      const delta = choice.delta.content;
      if (delta && !call.delta(delta, promptEstimate)) break;
    }
  });
  // An aborted OpenAI stream reports no usage: Loom's estimate is metered, marked as one.
  call.throwIfCutShort((failed) => estimateCutShort(failed, promptEstimate, call.text));
  return finish(ectx, pricing, {
    text: call.text,
    toolCalls: [...tools.values()].map((t) => ({
      id: t.id,
      name: t.name,
      input: parseArguments(t.json),
    })),
    stopReason,
    model: pricing.model,
    ...usageOr(usage, input, call.text),
  });
}

// --- Responses API ---

function responsesParams(options: OpenAiEffectOptions, input: LlmInput) {
  const items: OpenAI.Responses.ResponseInputItem[] = [];
  for (const m of input.messages) {
    if (m.role === "tool") {
      items.push({ type: "function_call_output", call_id: m.toolCallId, output: m.content });
      continue;
    }
    if (m.content !== "" || m.role === "user") items.push({ role: m.role, content: m.content });
    if (m.role === "assistant") {
      for (const c of m.toolCalls ?? []) {
        items.push({
          type: "function_call",
          call_id: c.id,
          name: c.name,
          arguments: JSON.stringify(c.input ?? {}),
        });
      }
    }
  }
  return {
    model: options.model,
    input: items,
    ...(input.system === undefined ? {} : { instructions: input.system }),
    max_output_tokens: input.maxTokens ?? DEFAULT_MAX_TOKENS, // as chatParams'

    ...(input.tools === undefined
      ? {}
      : {
          tools: input.tools.map((t) => ({
            type: "function" as const,
            name: t.name,
            parameters: t.inputSchema,
            strict: false,
            ...(t.description === undefined ? {} : { description: t.description }),
          })),
        }),
  };
}

/** What a finished Response says: its text, tool calls, status, model and usage. */
function fromResponse(
  response: OpenAI.Responses.Response,
): Omit<LlmResult, "usage"> & { usage?: LlmUsage } {
  let text = "";
  const toolCalls: LlmToolCall[] = [];
  for (const item of response.output) {
    if (item.type === "message") {
      for (const c of item.content) if (c.type === "output_text") text += c.text;
    } else if (item.type === "function_call") {
      toolCalls.push({ id: item.call_id, name: item.name, input: parseArguments(item.arguments) });
    }
  }
  const u = response.usage;
  const cached = u?.input_tokens_details?.cached_tokens ?? 0;
  const written = u?.input_tokens_details?.cache_write_tokens ?? 0;
  return {
    text,
    toolCalls,
    stopReason: response.status ?? null,
    model: response.model,
    ...(u
      ? {
          usage: {
            inputTokens: u.input_tokens - cached - written,
            outputTokens: u.output_tokens,
            cacheReadTokens: cached,
            cacheWriteTokens: written,
          },
        }
      : {}),
  };
}

async function responsesOnce(
  client: OpenAI,
  options: OpenAiEffectOptions,
  input: LlmInput,
  ectx: EffectContext,
  pricing: CallPricing,
): Promise<LlmResult> {
  const response = await client.responses.create(
    { ...responsesParams(options, input), stream: false },
    { signal: ectx.signal, maxRetries: 0 },
  );
  const r = fromResponse(response);
  return finish(ectx, pricing, { ...r, ...usageOr(r.usage, input, r.text) });
}

/** Text as `response.output_text.delta`; usage and tool calls only on `response.completed`. */
async function responsesStreamed(
  client: OpenAI,
  options: OpenAiEffectOptions,
  input: LlmInput,
  ectx: EffectContext,
  pricing: CallPricing,
): Promise<LlmResult> {
  const call = new StreamSession(ectx, options.guard, pricing);
  const promptEstimate = promptTokensEstimate(input);
  let completed: ReturnType<typeof fromResponse> | undefined;
  await call.consume(async () => {
    const stream = await client.responses.create(
      { ...responsesParams(options, input), stream: true },
      { signal: call.signal, maxRetries: 0 },
    );
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") {
        if (!call.delta(event.delta, promptEstimate)) break;
      } else if (event.type === "response.created" || event.type === "response.in_progress") {
        pricing.answeredBy(event.response.model); // B1: however the call ends
      } else if (event.type === "response.completed" || event.type === "response.incomplete") {
        completed = fromResponse(event.response);
      } else if (event.type === "response.failed") {
        const e = event.response.error;
        throw new Error(
          `OpenAI response failed: ${e ? `${e.code}: ${e.message}` : "no reason given"}`,
        );
      }
    }
  });
  call.throwIfCutShort((failed) => estimateCutShort(failed, promptEstimate, call.text));
  const text = call.text;
  return finish(ectx, pricing, {
    text,
    toolCalls: completed?.toolCalls ?? [],
    stopReason: completed?.stopReason ?? null,
    model: completed?.model ?? pricing.model,
    ...usageOr(completed?.usage, input, text),
  });
}

// --- Estimates, for calls the provider did not report ---

/** The prompt's characters / 4: the input estimate until the provider reports its usage. */
function promptTokensEstimate(input: LlmInput): number {
  const parts = input.messages.map((m) =>
    m.role === "assistant" && m.toolCalls?.length
      ? m.content + JSON.stringify(m.toolCalls)
      : m.content,
  );
  return estimateTokens(
    [...(input.system === undefined ? [] : [input.system]), ...parts].join("\n"),
  );
}

/** The usage reported, or one estimated from the prompt and the text and marked as such. */
function usageOr(
  reported: LlmUsage | undefined,
  input: LlmInput,
  text: string | null | undefined,
): Pick<LlmResult, "usage" | "usageEstimated"> {
  if (reported) return { usage: reported };
  const usage = {
    inputTokens: promptTokensEstimate(input),
    outputTokens: estimateTokens(text ?? ""),
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  };
  return { usage, usageEstimated: true };
}

/** A cut-short call's estimate; none for one that failed before it streamed anything. */
function estimateCutShort(failed: boolean, input: number, text: string) {
  return failed && text === "" ? undefined : { input, output: estimateTokens(text) };
}
