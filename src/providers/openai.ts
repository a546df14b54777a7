/**
 * `createLlmEffect({ provider: "openai", ... })`: a Chat Completions call through the official
 * SDK (`openai`) as a Loom effect, under the same rules as the Anthropic one (anthropic.ts): the
 * SDK's retries off, the step's signal forwarded (checked after the stream's loop, which an abort
 * ends silently), usage as the provider reports it, priced from pinned data and recorded.
 *
 * A stream asks for its trailing usage chunk (`stream_options.include_usage`). A stream cut short
 * never gets it: its usage is Loom's estimate (input from the prompt's characters, output from the
 * text so far), metered and marked as an estimate. Cached prompt tokens count as input read from
 * cache. `api: "responses"` uses the Responses API instead (streaming only): its usage comes on
 * `response.completed`, so a cut-short call is metered from estimates the same way.
 */
import OpenAI from "openai";
import { InvalidInputError } from "../kernel/errors.ts";
import type { Effect, EffectContext } from "../runtime/flow.ts";
import { finish, StreamSession, type LlmInput, type LlmResult, type LlmUsage } from "./llm-core.ts";
import { charsOver4, type StreamGuard } from "./stream.ts";

export interface OpenAiEffectOptions {
  provider: "openai";
  model: string;
  /** Chat Completions (default) or the Responses API (streaming only). */
  api?: "chat" | "responses";
  stream?: boolean;
  name?: string;
  client?: OpenAI;
  /** Must include `/v1`. */
  baseURL?: string;
  apiKey?: string;
  guard?: StreamGuard;
}

export function openAiEffect(options: OpenAiEffectOptions): Effect<LlmInput, LlmResult> {
  if (typeof options.model !== "string" || options.model === "") {
    throw new InvalidInputError("createLlmEffect needs a model name");
  }
  const client =
    options.client ??
    new OpenAI({
      apiKey: options.apiKey ?? process.env.OPENAI_API_KEY ?? "none",
      maxRetries: 0,
      ...(options.baseURL ? { baseURL: options.baseURL } : {}),
    });
  if (options.api === "responses" && options.stream === false) {
    throw new InvalidInputError("the Responses API is wired for streaming only: omit stream");
  }
  return {
    name: options.name ?? "llm",
    run: (input, ectx) =>
      options.api === "responses"
        ? viaResponses(client, options, input, ectx)
        : options.stream === false
          ? once(client, options, input, ectx)
          : streamed(client, options, input, ectx),
  };
}

/** The Responses API: text as `response.output_text.delta`, usage only on `response.completed`. */
async function viaResponses(
  client: OpenAI,
  options: OpenAiEffectOptions,
  input: LlmInput,
  ectx: EffectContext,
): Promise<LlmResult> {
  const call = new StreamSession(ectx, options.guard);
  const promptEstimate = promptTokensEstimate(input);
  let model = options.model;
  let usage: LlmUsage | undefined;
  let stopReason: string | null = null;
  await call.consume(async () => {
    const stream = await client.responses.create(
      {
        model: options.model,
        input: input.messages,
        stream: true,
        ...(input.system === undefined ? {} : { instructions: input.system }),
        ...(input.maxTokens === undefined ? {} : { max_output_tokens: input.maxTokens }),
      },
      { signal: call.signal, maxRetries: 0 },
    );
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") {
        if (!call.delta(event.delta, promptEstimate)) break;
      } else if (event.type === "response.completed") {
        model = event.response.model;
        stopReason = event.response.status ?? null;
        const u = event.response.usage;
        if (u) {
          const cached = u.input_tokens_details?.cached_tokens ?? 0;
          usage = {
            inputTokens: u.input_tokens - cached,
            outputTokens: u.output_tokens,
            cacheReadTokens: cached,
            cacheWriteTokens: 0,
          };
        }
      }
    }
  });
  call.throwIfCutShort((failed) => estimateCutShort(failed, promptEstimate, call.text));
  const text = call.text;
  return finish(ectx, "openai", {
    text,
    toolCalls: [],
    stopReason,
    model,
    usage: usage ?? {
      inputTokens: promptEstimate,
      outputTokens: charsOver4(text),
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    },
  });
}

function messages(input: LlmInput) {
  const system =
    input.system === undefined ? [] : [{ role: "system" as const, content: input.system }];
  return [...system, ...input.messages];
}

function usageOf(u: OpenAI.CompletionUsage): LlmUsage {
  const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    inputTokens: u.prompt_tokens - cached,
    outputTokens: u.completion_tokens,
    cacheReadTokens: cached,
    cacheWriteTokens: 0,
  };
}

async function once(
  client: OpenAI,
  options: OpenAiEffectOptions,
  input: LlmInput,
  ectx: EffectContext,
): Promise<LlmResult> {
  const completion = await client.chat.completions.create(
    {
      model: options.model,
      messages: messages(input),
      ...(input.maxTokens === undefined ? {} : { max_completion_tokens: input.maxTokens }),
    },
    { signal: ectx.signal, maxRetries: 0 },
  );
  const choice = completion.choices[0];
  const usage: LlmUsage = completion.usage
    ? usageOf(completion.usage)
    : { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  return finish(ectx, "openai", {
    text: choice?.message.content ?? "",
    toolCalls: (choice?.message.tool_calls ?? []).flatMap((t) =>
      t.type === "function"
        ? [{ id: t.id, name: t.function.name, input: parseArguments(t.function.arguments) }]
        : [],
    ),
    stopReason: choice?.finish_reason ?? null,
    model: completion.model,
    usage,
  });
}

async function streamed(
  client: OpenAI,
  options: OpenAiEffectOptions,
  input: LlmInput,
  ectx: EffectContext,
): Promise<LlmResult> {
  const call = new StreamSession(ectx, options.guard);
  // Until the provider reports usage, the prompt's size is the input estimate.
  const promptEstimate = promptTokensEstimate(input);
  let model = options.model;
  let stopReason: string | null = null;
  let usage: LlmUsage | undefined;
  const tools = new Map<number, { id: string; name: string; json: string }>();
  await call.consume(async () => {
    const stream = await client.chat.completions.create(
      {
        model: options.model,
        messages: messages(input),
        stream: true,
        stream_options: { include_usage: true },
        ...(input.maxTokens === undefined ? {} : { max_completion_tokens: input.maxTokens }),
      },
      { signal: call.signal, maxRetries: 0 },
    );
    for await (const chunk of stream) {
      model = chunk.model;
      if (chunk.usage) usage = usageOf(chunk.usage);
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
  const text = call.text;
  return finish(ectx, "openai", {
    text,
    toolCalls: [...tools.values()].map((t) => ({
      id: t.id,
      name: t.name,
      input: parseArguments(t.json),
    })),
    stopReason,
    model,
    usage: usage ?? {
      inputTokens: promptEstimate,
      outputTokens: charsOver4(text),
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    },
  });
}

/** The prompt's characters / 4: the input estimate until the provider reports its usage. */
function promptTokensEstimate(input: LlmInput): number {
  return charsOver4(
    messages(input)
      .map((m) => m.content)
      .join("\n"),
  );
}

/** A cut-short call's estimate; none for one that failed before it streamed anything. */
function estimateCutShort(failed: boolean, input: number, text: string) {
  return failed && text === "" ? undefined : { input, output: charsOver4(text) };
}

function parseArguments(json: string): unknown {
  if (json === "") return {};
  try {
    return JSON.parse(json) as unknown;
  } catch {
    return { unparsed: json };
  }
}
