/**
 * What the fake OpenAI server (fake-openai.ts) writes once a request is judged: the Chat
 * Completions and Responses streams, and the bodies (a completion, a Response) both the streams
 * and the plain answers are made of.
 *
 * - Chat: data-only lines, `usage: null` on every chunk, a trailing usage chunk with
 *   `choices: []` when `stream_options.include_usage` is set, then `[DONE]`; an error midway is a
 *   data line holding `{ error }`.
 * - Responses: named events with a `sequence_number`; an error midway is `event: error`.
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
  type StreamRecord,
} from "./fake-server.ts";

/** What one answer is made of, for either API. */
export interface Answer extends DeltaStream {
  record: StreamRecord & { body: { stream_options?: { include_usage?: boolean } } };
  text: string;
  model: string;
  toolCalls: FakeToolCall[];
  usage: { prompt: number; completion: number; cached: number; written: number };
}

export async function chatStream(res: ServerResponse, a: Answer): Promise<void> {
  const end = openStream(res, a.record);
  const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
  const base = { id: "chatcmpl-fake", created: 1, model: a.model };
  const chunk = (delta: unknown, finish: string | null) => ({
    ...base,
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, finish_reason: finish }],
    usage: null,
  });
  send(chunk({ role: "assistant", content: "" }, null));
  const whole = await writeDeltas(
    a,
    (delta) => send(chunk({ content: delta }, null)),
    () => {
      send({ error: { message: "The server had an error", type: "server_error", code: null } });
      end();
    },
  );
  if (!whole) return;
  a.toolCalls.forEach((t, index) => {
    send(
      chunk(
        {
          tool_calls: [
            { index, id: t.id, type: "function", function: { name: t.name, arguments: "" } },
          ],
        },
        null,
      ),
    );
    for (const part of splitText(JSON.stringify(t.input), 7)) {
      send(chunk({ tool_calls: [{ index, function: { arguments: part } }] }, null));
    }
  });
  send(chunk({}, a.toolCalls.length > 0 ? "tool_calls" : "stop"));
  if (a.record.body.stream_options?.include_usage) {
    send({ ...base, object: "chat.completion.chunk", choices: [], usage: chatUsage(a) });
  }
  res.write("data: [DONE]\n\n");
  end();
}

export async function responsesStream(res: ServerResponse, a: Answer): Promise<void> {
  const end = openStream(res, a.record);
  let seq = 0;
  const send = (type: string, data: Record<string, unknown>) =>
    res.write(
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`,
    );
  send("response.created", { response: response(a, "in_progress") });
  const whole = await writeDeltas(
    a,
    (delta) =>
      send("response.output_text.delta", {
        item_id: "msg_fake",
        output_index: 0,
        content_index: 0,
        delta,
      }),
    () => {
      send("error", { code: "server_error", message: "The server had an error", param: null });
      end();
    },
  );
  if (!whole) return;
  a.toolCalls.forEach((t, i) => {
    const item = functionCall(t, "in_progress", "");
    send("response.output_item.added", { output_index: i + 1, item });
    for (const delta of splitText(JSON.stringify(t.input), 7)) {
      send("response.function_call_arguments.delta", {
        item_id: item.id,
        output_index: i + 1,
        delta,
      });
    }
    const done = functionCall(t, "completed", JSON.stringify(t.input));
    send("response.output_item.done", { output_index: i + 1, item: done });
  });
  send("response.completed", { response: response(a, "completed") });
  end();
}

function chatUsage(a: Answer) {
  return {
    prompt_tokens: a.usage.prompt,
    completion_tokens: a.usage.completion,
    total_tokens: a.usage.prompt + a.usage.completion,
    prompt_tokens_details: { cached_tokens: a.usage.cached, cache_write_tokens: a.usage.written },
  };
}

export function completion(a: Answer) {
  const toolCalls = a.toolCalls.map((t) => ({
    id: t.id,
    type: "function",
    function: { name: t.name, arguments: JSON.stringify(t.input) },
  }));
  return {
    id: "chatcmpl-fake",
    created: 1,
    model: a.model,
    object: "chat.completion",
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: a.text,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: toolCalls.length > 0 ? "tool_calls" : "stop",
      },
    ],
    usage: chatUsage(a),
  };
}

function functionCall(t: FakeToolCall, status: string, args: string) {
  return {
    id: `fc_${t.id}`,
    type: "function_call",
    status,
    call_id: t.id,
    name: t.name,
    arguments: args,
  };
}

/** A Response object: empty while in progress, the whole answer and usage once completed. */
export function response(a: Answer, status: "in_progress" | "completed") {
  const base = { id: "resp_fake", object: "response", created_at: 1, model: a.model, status };
  if (status === "in_progress") return { ...base, output: [] };
  return {
    ...base,
    output: [
      {
        id: "msg_fake",
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: a.text, annotations: [] }],
      },
      ...a.toolCalls.map((t) => functionCall(t, "completed", JSON.stringify(t.input))),
    ],
    usage: {
      input_tokens: a.usage.prompt,
      input_tokens_details: { cached_tokens: a.usage.cached, cache_write_tokens: a.usage.written },
      output_tokens: a.usage.completion,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: a.usage.prompt + a.usage.completion,
    },
  };
}
