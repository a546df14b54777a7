/**
 * The shapes of an LLM call's conversation, as types only: what the dashboard's browser client
 * and analytics/conversation.ts read, with nothing that needs Node (llm-core.ts re-exports them).
 */
/** A tool call the model asked for. */
export interface LlmToolCall {
  id: string;
  name: string;
  input: unknown;
}

/**
 * One turn of the conversation: text from the user or the assistant, the assistant's tool
 * calls (as an earlier step returned them), and a tool's result answering one of them.
 */
export type LlmMessage =
  | { role: "user"; content: string }
  | { role: "assistant"; content: string; toolCalls?: LlmToolCall[] }
  | { role: "tool"; toolCallId: string; content: string };

export interface LlmUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/** A price used: what the call cost, where the price came from, and the model it priced. */
export interface PriceUsed {
  usd: number;
  source: string;
  /**
   * The model the call was priced as: the one the provider said answered, else the requested
   * one (absent from results recorded before it was recorded).
   */
  model?: string;
}
