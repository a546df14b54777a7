/**
 * The stream the fake Anthropic server (fake-anthropic.ts) writes: Messages API SSE, named
 * `event:` lines from `message_start` to `message_stop`, with a `ping`, the text's deltas, the
 * tool calls' input in JSON pieces, and an `event: error` midway when the request is set to fail.
 *
 * Invariant: a client that went away gets nothing more, and what it was sent is counted in its
 * request's record (`deltasSent`, `closedEarly`).
 */
import type { ServerResponse } from "node:http";
import {
  openStream,
  splitText,
  writeDeltas,
  type DeltaStream,
  type FakeToolCall,
} from "./fake-server.ts";

/** What one streamed answer is made of. */
export interface MessageStream extends DeltaStream {
  model: string;
  usage: {
    input_tokens: number;
    cache_read_input_tokens: number;
    cache_creation_input_tokens: number;
  };
  outputTokens: number;
  toolCalls: FakeToolCall[];
  stopReason: string;
  /** The cumulative input tokens `message_delta` reports, read as the stream ends. */
  finalInputTokens: () => number | undefined;
}

type Send = (event: string, data: unknown) => void;

export async function streamMessage(res: ServerResponse, a: MessageStream): Promise<void> {
  const end = openStream(res, a.record);
  const send: Send = (event, data) =>
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  send("message_start", {
    type: "message_start",
    message: {
      id: "msg_fake",
      type: "message",
      role: "assistant",
      content: [],
      model: a.model,
      stop_reason: null,
      stop_sequence: null,
      usage: { ...a.usage, output_tokens: 1 },
    },
  });
  send("content_block_start", {
    type: "content_block_start",
    index: 0,
    content_block: { type: "text", text: "" },
  });
  send("ping", { type: "ping" });
  const whole = await writeDeltas(
    a,
    (delta) =>
      send("content_block_delta", {
        type: "content_block_delta",
        index: 0,
        delta: { type: "text_delta", text: delta },
      }),
    () => {
      send("error", {
        type: "error",
        error: { type: "overloaded_error", message: "Overloaded" },
      });
      end();
    },
  );
  if (!whole) return;
  send("content_block_stop", { type: "content_block_stop", index: 0 });
  sendToolCalls(send, a.toolCalls);
  const finalInputTokens = a.finalInputTokens();
  send("message_delta", {
    type: "message_delta",
    delta: { stop_reason: a.stopReason, stop_sequence: null },
    // Cumulative; the input figure only when set (the API may repeat it here).
    usage: {
      output_tokens: a.outputTokens,
      ...(finalInputTokens === undefined ? {} : { input_tokens: finalInputTokens }),
    },
  });
  send("message_stop", { type: "message_stop" });
  end();
}

/** Each tool call as a `tool_use` block after the text's (index 0). */
function sendToolCalls(send: Send, toolCalls: FakeToolCall[]): void {
  toolCalls.forEach((t, i) => {
    const index = i + 1;
    send("content_block_start", {
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id: t.id, name: t.name, input: {} },
    });
    // The input streams as JSON in pieces, as the API sends it.
    for (const partial of splitText(JSON.stringify(t.input), 7)) {
      send("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: partial },
      });
    }
    send("content_block_stop", { type: "content_block_stop", index });
  });
}
