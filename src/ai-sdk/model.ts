/**
 * `durableModel(model, options)`: an AI SDK language model whose every call is a Loom effect of
 * the flow that makes it. `generateText`, `streamText` and agents call it as any model; inside
 * a flow each `doGenerate` and `doStream` is one step: recorded once, answered from the log on a
 * replay (no new request), cancellable, timed out and retried by Loom, metered, priced, bounded
 * by budgets, stream guards and rate limits as the native effects are (providers/).
 *
 * Invariants (tests cite AM1..AM6):
 * AM1. A call finds its flow by the flow scope (runtime/flow-scope.ts): outside a flow, or inside
 *      a step's code, it is refused with NotInFlowError before anything is sent or recorded.
 * AM2. The SDK receives what the step recorded, read back (record.ts), live and on a replay
 *      alike. A failed call reaches the SDK as the error the step recorded, read back: never an
 *      error the SDK's own retry would take up (`maxRetries` does nothing; Loom's retry policy
 *      owns every attempt).
 * AM3. The step's signal, merged with the SDK's own `abortSignal`, reaches the model: a cancel,
 *      a step timeout or a severing guard aborts the provider's request.
 * AM4. A stream is consumed inside the step: its text deltas go to the live delta subscribers
 *      and through the guard (providers/llm-core.ts StreamSession) as they come; the SDK gets
 *      the recorded parts once the step settles. A guard that throws severs the request, meters
 *      what streamed as an estimate, and fails the step with its error (QuotaExceededError for
 *      `streamTokenBudget`: a QUOTA_EXCEEDED fact).
 * AM5. A stream that ends in an `error` part, or without a `finish`, fails the step after
 *      metering what streamed as an estimate: a retry of the whole call follows, as for the
 *      native effects' streams cut midway.
 * AM6. Usage is metered, priced and annotated by providers/pricing.ts `finish`, the native
 *      effects' own path (usage.ts AU1, AU2).
 */
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
} from "@ai-sdk/provider";
import type { Effect, EffectContext, ExecuteOptions, RetryPolicy } from "../effects/effect.ts";
import { InvalidInputError, NotInFlowError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { checkedPrice, type ModelPrice } from "../kernel/prices.ts";
import { CallPricing, finish, unpricedModel } from "../providers/pricing.ts";
import { DEFAULT_MAX_TOKENS, type LlmResult, type LlmUsage } from "../providers/llm-core.ts";
import { StreamSession } from "../providers/llm-core.ts";
import type { StreamGuard } from "../providers/stream.ts";
import { currentFlowScope, enableFlowScope } from "../runtime/flow-scope.ts";
import type { FlowContext } from "../runtime/contract.ts";
import {
  partsFrom,
  pushPart,
  recordedOptions,
  recordedParts,
  recordedResult,
  resultFrom,
  streamOf,
} from "./record.ts";
import { estimatedUsage, providerIdOf, reservationOf, usageOf } from "./usage.ts";

export interface DurableModelOptions {
  /** The step's name (default "llm", as the native effects'). */
  name?: string;
  /** The provider its price is looked up under (default: the model's, up to its first dot). */
  provider?: string;
  /** Called after every streamed text delta; throw to sever (`streamTokenBudget`). */
  guard?: StreamGuard;
  /** The model's price in USD per million tokens, over the runtime's `prices` and price data. */
  price?: ModelPrice;
  /** The rate limiter its calls reserve with (default `<provider>:<model>`), or false. */
  limiter?: string | false;
  /** Each call's timeout, from its first attempt's start (as `ctx.execute`'s). */
  timeoutMs?: number;
  /** Each call's retry policy over the runtime's, or false for a single attempt. */
  retry?: RetryPolicy | false;
}

/** What a call's step records as its output. */
interface Recorded {
  /** `doGenerate`'s result (record.ts AR2). */
  result?: Json;
  /** `doStream`'s parts (record.ts AR2..AR4). */
  parts?: Json;
  usage: LlmUsage;
  usageEstimated?: true;
  price?: Json;
}

/** An AI SDK model whose calls are steps of the flow that makes them (AM1..AM6). */
export function durableModel(model: LanguageModelV4, options: DurableModelOptions = {}) {
  checkModel(model);
  checkOptions(options);
  enableFlowScope();
  const providerId = providerIdOf(model.provider, options.provider);
  const execute: ExecuteOptions = {
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    ...(options.retry === undefined ? {} : { retry: options.retry }),
    ...(options.limiter === undefined ? {} : { limiter: options.limiter }),
  };
  const call = async (kind: "generate" | "stream", opts: LanguageModelV4CallOptions) => {
    const ctx = flowOf(model); // AM1
    const effect = callEffect(model, options, providerId, kind, opts);
    return (await ctx.execute(effect, recordedOptions(opts), execute)) as unknown as Recorded;
  };
  const durable: LanguageModelV4 = {
    specificationVersion: "v4",
    provider: model.provider,
    modelId: model.modelId,
    get supportedUrls() {
      return model.supportedUrls;
    },
    async doGenerate(opts): Promise<LanguageModelV4GenerateResult> {
      const recorded = await call("generate", opts);
      return resultFrom(recorded.result ?? null); // AM2
    },
    async doStream(opts): Promise<LanguageModelV4StreamResult> {
      const recorded = await call("stream", opts);
      return { stream: streamOf(partsFrom(recorded.parts ?? [])) }; // AM2
    },
  };
  return durable;
}

function checkModel(model: LanguageModelV4): void {
  const m = model as Partial<LanguageModelV4> | null;
  if (
    m === null ||
    typeof m !== "object" ||
    typeof m.doGenerate !== "function" ||
    typeof m.doStream !== "function"
  ) {
    throw new InvalidInputError(
      "durableModel needs an AI SDK language model (an object with doGenerate and doStream)",
    );
  }
  if (m.specificationVersion !== "v4") {
    throw new InvalidInputError(
      `durableModel takes a model of the AI SDK's v4 specification (ai@7, @ai-sdk/*@4); this one is ${JSON.stringify(m.specificationVersion)}`,
    );
  }
}

function checkOptions(options: DurableModelOptions): void {
  if (options.name !== undefined && (typeof options.name !== "string" || options.name === "")) {
    throw new InvalidInputError("durableModel: name must be a non-empty string");
  }
  if (options.guard !== undefined && typeof options.guard !== "function") {
    throw new InvalidInputError("durableModel: guard must be a function (streamTokenBudget(...))");
  }
  const limiter = options.limiter;
  if (limiter !== undefined && limiter !== false && (typeof limiter !== "string" || !limiter)) {
    throw new InvalidInputError("durableModel: limiter must be a limiter's name or false");
  }
  if (options.price !== undefined) checkedPrice(options.price, "durableModel's price");
}

/** AM1 */
function flowOf(model: LanguageModelV4): FlowContext {
  const scope = currentFlowScope();
  if (scope !== undefined && "ctx" in scope) return scope.ctx;
  const what = `the durable model "${model.provider}:${model.modelId}"`;
  throw new NotInFlowError(
    scope === undefined
      ? `${what} was called outside a flow: call it from a flow's body (generateText inside flow$), or use the model it wraps`
      : `${what} was called inside step "${scope.step}": a step's code cannot record steps; call it from the flow's body, or start a child flow`,
  );
}

/** The effect of one call: the model called with the step's signal, its outcome recorded. */
function callEffect(
  model: LanguageModelV4,
  options: DurableModelOptions,
  providerId: string,
  kind: "generate" | "stream",
  opts: LanguageModelV4CallOptions,
): Effect<Json, Json> {
  const reservation = (prices?: Parameters<typeof reservationOf>[4]) =>
    reservationOf(opts, providerId, model.modelId, options.price, prices);
  return {
    name: options.name ?? "llm",
    reserve: (_input, prices) => reservation(prices),
    unpriced: (_input, prices) => unpricedModel(providerId, model.modelId, options.price, prices),
    limiter: () => {
      if (options.limiter === false) return undefined;
      const tokens = reservation().tokens;
      return {
        name: options.limiter ?? `${providerId}:${model.modelId}`,
        inputTokens: tokens?.input ?? 0,
        outputTokens: tokens?.output ?? 0,
      };
    },
    run: async (_input, ectx) => {
      const pricing = new CallPricing(providerId, model.modelId, options.price, ectx.prices);
      ectx.annotate?.({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": providerId,
        "gen_ai.system": providerId,
        "gen_ai.request.model": model.modelId,
        "gen_ai.request.max_tokens": opts.maxOutputTokens,
      });
      return kind === "generate"
        ? generated(model, opts, ectx, pricing)
        : streamed(model, opts, ectx, pricing, options.guard);
    },
  };
}

/**
 * AU3: the output a call asks for at most: its own, else what it reserved (DEFAULT_MAX_TOKENS),
 * so a call without one cannot stream past its reservation (budgets, rate limits).
 */
function maxOutputOf(opts: LanguageModelV4CallOptions): number {
  return opts.maxOutputTokens ?? DEFAULT_MAX_TOKENS;
}

/** AM3: the step's signal, and the SDK's when it passed one. */
function signalOf(step: AbortSignal, sdk: AbortSignal | undefined): AbortSignal {
  return sdk === undefined ? step : AbortSignal.any([step, sdk]);
}

async function generated(
  model: LanguageModelV4,
  opts: LanguageModelV4CallOptions,
  ectx: EffectContext,
  pricing: CallPricing,
): Promise<Json> {
  const result = await model.doGenerate({
    ...opts,
    abortSignal: signalOf(ectx.signal, opts.abortSignal),
    maxOutputTokens: maxOutputOf(opts),
  });
  pricing.answeredBy(result.response?.modelId);
  const text = result.content.map((c) => (c.type === "text" ? c.text : "")).join("");
  const metered = meter(ectx, pricing, opts, result.usage, text, result.finishReason.raw ?? null);
  return { result: recordedResult(result), ...metered } as unknown as Json;
}

/** AM4, AM5 */
async function streamed(
  model: LanguageModelV4,
  opts: LanguageModelV4CallOptions,
  ectx: EffectContext,
  pricing: CallPricing,
  guard: StreamGuard | undefined,
): Promise<Json> {
  const session = new StreamSession(ectx, guard, pricing);
  const inputEstimate = estimatedUsage(opts, "").inputTokens;
  const parts: LanguageModelV4StreamPart[] = [];
  let finished: Extract<LanguageModelV4StreamPart, { type: "finish" }> | undefined;
  await session.consume(async () => {
    const { stream } = await model.doStream({
      ...opts,
      abortSignal: signalOf(session.signal, opts.abortSignal),
      maxOutputTokens: maxOutputOf(opts),
    });
    const reader = stream.getReader();
    try {
      for (;;) {
        const next = await reader.read();
        if (next.done) break;
        const part = next.value;
        if (part.type === "response-metadata") pricing.answeredBy(part.modelId);
        if (part.type === "error") throw part.error; // AM5
        if (part.type === "finish") finished = part;
        pushPart(parts, part);
        if (part.type === "text-delta" && !session.delta(part.delta, inputEstimate)) break;
      }
    } finally {
      await reader.cancel().catch(() => undefined);
    }
    if (finished === undefined && !session.signal.aborted) {
      throw new Error(`the stream of ${model.provider}:${model.modelId} ended without a finish`);
    }
  });
  session.throwIfCutShort(() => ({
    input: inputEstimate,
    output: estimatedUsage(opts, session.text).outputTokens,
  }));
  const reason = finished?.finishReason.raw ?? null;
  const metered = meter(ectx, pricing, opts, finished?.usage, session.text, reason);
  return { parts: recordedParts(parts), ...metered } as unknown as Json;
}

/** AM6: meters the call through the native effects' path; what the step records of it. */
function meter(
  ectx: EffectContext,
  pricing: CallPricing,
  opts: LanguageModelV4CallOptions,
  reported: Parameters<typeof usageOf>[0],
  text: string,
  stopReason: string | null,
): Omit<Recorded, "result" | "parts"> {
  const usage = usageOf(reported);
  const result: LlmResult = {
    text,
    toolCalls: [],
    stopReason,
    model: pricing.model,
    usage: usage ?? estimatedUsage(opts, text),
    ...(usage === undefined ? { usageEstimated: true as const } : {}),
  };
  const done = finish(ectx, pricing, result);
  return {
    usage: done.usage,
    ...(done.usageEstimated ? { usageEstimated: true as const } : {}),
    ...(done.price === undefined ? {} : { price: done.price as unknown as Json }),
  };
}
