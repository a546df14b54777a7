/**
 * A local server that speaks Anthropic's Messages API (`POST /v1/messages`), for tests and the
 * demo: a real HTTP server the official SDK reaches through `baseURL`, streaming the real SSE
 * wire format (named `event:` lines, `message_start` ... `message_stop`, `ping`, `event: error`).
 *
 * What it answers is set per server: the text, how many characters each delta carries and how
 * long it waits between deltas, the usage it reports (cache tokens included), statuses to
 * answer the first requests with (a 529 with `x-should-retry`, say), an `event: error` in the
 * middle of the first streams, tool calls (`tool_use` blocks) to end the answer with, and the
 * model it says answered. It records every request, and whether and when the client closed a
 * stream before its last delta. This module judges each request; the stream written for it is
 * fake-anthropic-stream.ts's.
 */
import { streamMessage } from "./fake-anthropic-stream.ts";
import { serveJson, splitText, type FakeToolCall, type StreamRecord } from "./fake-server.ts";

export interface FakeAnthropicOptions {
  text?: string;
  /** Characters per `text_delta` (default 8). */
  deltaChars?: number;
  /** Milliseconds between deltas (default 0). */
  deltaMs?: number;
  inputTokens?: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  /** Statuses for the first requests, in order (then 200). */
  failFirst?: number[];
  /**
   * For the first requests, in order: after how many deltas the stream sends
   * `event: error` (an overloaded_error) and ends (undefined: it does not).
   */
  errorAfter?: (number | undefined)[];
  /** The cumulative input tokens `message_delta` reports (absent by default). */
  finalInputTokens?: number;
  /** Tool calls the answer ends with (`tool_use` blocks; stop reason `tool_use`). */
  toolCalls?: FakeToolCall[];
  /**
   * The model the answer names (`message_start`, the message), as a provider that serves an
   * alias by a dated model does. Default: the one asked for.
   */
  model?: string;
}

/** A tool call a fake server answers with. */
export type { FakeToolCall } from "./fake-server.ts";

export interface FakeRequest extends StreamRecord {
  body: {
    model?: string;
    stream?: boolean;
    max_tokens?: number;
    messages?: unknown;
    tools?: unknown;
    input?: unknown;
  };
}

export interface FakeAnthropic {
  baseURL: string;
  requests: FakeRequest[];
  set(options: FakeAnthropicOptions): void;
  close(): Promise<void>;
}

export async function fakeAnthropic(options: FakeAnthropicOptions = {}): Promise<FakeAnthropic> {
  let opts = options;
  const requests: FakeRequest[] = [];
  const server = await serveJson(async (parsed, _req, res) => {
    const body = parsed as FakeRequest["body"];
    const text = opts.text ?? "Tides rise and fall twice a day.";
    const deltas = splitText(text, opts.deltaChars ?? 8);
    const record: FakeRequest = {
      body,
      deltasSent: 0,
      deltasTotal: deltas.length,
      closedEarly: false,
    };
    requests.push(record);
    const status = opts.failFirst?.[requests.length - 1];
    if (status !== undefined && status !== 200) {
      res.writeHead(status, { "content-type": "application/json", "x-should-retry": "true" });
      const type = status === 529 ? "overloaded_error" : "api_error";
      res.end(JSON.stringify({ type: "error", error: { type, message: `fake ${status}` } }));
      return;
    }
    const usage = {
      input_tokens: opts.inputTokens ?? 11,
      cache_read_input_tokens: opts.cacheReadTokens ?? 0,
      cache_creation_input_tokens: opts.cacheWriteTokens ?? 0,
    };
    const outputTokens = Math.ceil(text.length / 4);
    const model = opts.model ?? body.model ?? "claude-sonnet-4-6";
    const toolCalls = opts.toolCalls ?? [];
    const stopReason = toolCalls.length > 0 ? "tool_use" : "end_turn";
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: "msg_fake",
          type: "message",
          role: "assistant",
          model,
          content: [{ type: "text", text }, ...toolCalls.map((t) => ({ type: "tool_use", ...t }))],
          stop_reason: stopReason,
          stop_sequence: null,
          usage: { ...usage, output_tokens: outputTokens },
        }),
      );
      return;
    }
    await streamMessage(res, {
      record,
      deltas,
      errorAfter: opts.errorAfter?.[requests.length - 1],
      deltaMs: () => opts.deltaMs,
      model,
      usage,
      outputTokens,
      toolCalls,
      stopReason,
      finalInputTokens: () => opts.finalInputTokens,
    });
  });
  return {
    baseURL: `http://127.0.0.1:${server.port}`,
    requests,
    set(next) {
      opts = next;
    },
    close: () => server.close(),
  };
}
