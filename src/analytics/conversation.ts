/**
 * An LLM call as a conversation (issue 25 item 2): what the model was sent (system, messages,
 * tools), what it answered (text, tool calls, stop reason), its tokens and price, and whether a
 * budget cut it mid-stream. A pure projection of the call's recorded input and output, which the
 * LLM effects record as `LlmInput` and `LlmResult` (providers/llm-core.ts).
 *
 * Invariants (tests cite K1..K3):
 * K1. A call is an LLM call when its recorded input is an object whose `messages` is an array;
 *     anything else is not a conversation (undefined), whatever its name.
 * K2. The answer, usage and price are the recorded output's, present only once the call
 *     completed with an object output; fields of the wrong type are left out, never guessed.
 * K3. `severed` is the refusal's message when the call failed with LOOM_QUOTA_EXCEEDED and the
 *     refusal was an estimate made mid-stream (the QUOTA_EXCEEDED fact or the error's details
 *     say `estimated: true`: providers/stream.ts streamTokenBudget); a refusal before the call
 *     (a budget already spent) is not a severed stream.
 */
import type { ErrorData } from "../kernel/errors.ts";
import { isPlainObject, type Json } from "../kernel/json.ts";
import type { LlmMessage, LlmToolCall, LlmUsage, PriceUsed } from "../providers/llm-types.ts";

export interface Conversation {
  model?: string;
  system?: string;
  messages: LlmMessage[];
  tools?: { name: string; description?: string }[];
  /** The answer, once the call completed. */
  answer?: { text: string; toolCalls: LlmToolCall[]; stopReason: string | null };
  usage?: LlmUsage;
  usageEstimated?: boolean;
  price?: PriceUsed;
  /** The call was cut by a budget mid-stream: the refusal's message. */
  severed?: string;
}

/** What a call recorded, as the conversation reads it. */
export interface RecordedCall {
  input?: Json;
  output?: Json;
  error?: ErrorData;
  /** The call's QUOTA_EXCEEDED facts' payloads, oldest first. */
  quota?: Json[];
}

/** K1..K3: the conversation of an LLM call, or undefined when the call is not one. */
export function conversationOf(call: RecordedCall): Conversation | undefined {
  const input = call.input;
  if (!isPlainObject(input) || !Array.isArray(input.messages)) return undefined;
  const out: Conversation = { messages: input.messages as unknown as LlmMessage[] };
  if (typeof input.system === "string") out.system = input.system;
  if (Array.isArray(input.tools)) out.tools = toolsOf(input.tools);
  const output = call.output;
  if (isPlainObject(output)) {
    if (typeof output.model === "string") out.model = output.model;
    if (typeof output.text === "string") {
      out.answer = {
        text: output.text,
        toolCalls: Array.isArray(output.toolCalls)
          ? (output.toolCalls as unknown as LlmToolCall[])
          : [],
        stopReason: typeof output.stopReason === "string" ? output.stopReason : null,
      };
    }
    if (isPlainObject(output.usage)) out.usage = usageOf(output.usage);
    if (output.usageEstimated === true) out.usageEstimated = true;
    if (isPlainObject(output.price) && typeof output.price.usd === "number") {
      out.price = output.price as unknown as PriceUsed;
    }
  }
  const severed = severedBy(call);
  if (severed !== undefined) out.severed = severed;
  return out;
}

function toolsOf(tools: Json[]): { name: string; description?: string }[] {
  const out: { name: string; description?: string }[] = [];
  for (const t of tools) {
    if (!isPlainObject(t) || typeof t.name !== "string") continue;
    out.push(
      typeof t.description === "string"
        ? { name: t.name, description: t.description }
        : { name: t.name },
    );
  }
  return out;
}

function usageOf(u: { [key: string]: Json }): LlmUsage {
  const n = (v: Json | undefined): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return {
    inputTokens: n(u.inputTokens),
    outputTokens: n(u.outputTokens),
    cacheReadTokens: n(u.cacheReadTokens),
    cacheWriteTokens: n(u.cacheWriteTokens),
  };
}

/** K3 */
function severedBy(call: RecordedCall): string | undefined {
  const error = call.error;
  if (error?.code !== "LOOM_QUOTA_EXCEEDED") return undefined;
  const details = error.details;
  const estimated =
    (isPlainObject(details) && details.estimated === true) ||
    (call.quota ?? []).some((q) => isPlainObject(q) && q.estimated === true);
  return estimated ? error.message : undefined;
}
