/**
 * A local server that speaks OpenAI's Chat Completions API (`POST /v1/chat/completions`) and
 * Responses API (`POST /v1/responses`), for tests and the demo: the official SDK reaches it
 * through `baseURL` (`http://127.0.0.1:PORT/v1`). Streams are the real SSE wire formats:
 *
 * - Chat: data-only lines, `usage: null` on every chunk, a trailing usage chunk with
 *   `choices: []` when `stream_options.include_usage` is set, then `[DONE]`; an error midway is a
 *   data line holding `{ error }`.
 * - Responses: named events (`response.created`, `response.output_text.delta`, function-call
 *   items and their argument deltas, `response.completed` with the usage); an error midway is
 *   `event: error`.
 *
 * Set per server: the text, characters per delta, milliseconds between deltas, the usage it
 * reports, statuses for the first requests, an error midway through the first streams, and tool
 * calls to end the answer with. It records every request and early closes.
 */
import type { ServerResponse } from "node:http";
import { openStream, serveJson, splitText } from "./fake-server.ts";
import type { FakeRequest, FakeToolCall } from "./fake-anthropic.ts";

export interface FakeOpenAiOptions {
  text?: string;
  deltaChars?: number;
  deltaMs?: number;
  promptTokens?: number;
  cachedTokens?: number;
  /** Prompt tokens written to the cache (reported beside the cached ones, inside the prompt's). */
  cacheWriteTokens?: number;
  failFirst?: number[];
  /** For the first requests, in order: after how many deltas the stream fails (undefined: not). */
  errorAfter?: (number | undefined)[];
  /** Tool calls the answer ends with (finish reason `tool_calls`; function_call items). */
  toolCalls?: FakeToolCall[];
}

export interface FakeOpenAi {
  /** Includes `/v1`, as the SDK wants it. */
  baseURL: string;
  requests: (FakeRequest & { body: { stream_options?: { include_usage?: boolean } } })[];
  set(options: FakeOpenAiOptions): void;
  close(): Promise<void>;
}

type OpenAiRequest = FakeOpenAi["requests"][number];

/** What one answer is made of, for either API. */
interface Answer {
  record: OpenAiRequest;
  deltas: string[];
  text: string;
  model: string;
  toolCalls: FakeToolCall[];
  errorAfter: number | undefined;
  usage: { prompt: number; completion: number; cached: number; written: number };
}

export async function fakeOpenAi(options: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
  let opts = options;
  const requests: FakeOpenAi["requests"] = [];
  const server = await serveJson(async (parsed, req, res) => {
    const body = parsed as OpenAiRequest["body"];
    const text = opts.text ?? "Tides rise and fall twice a day.";
    const deltas = splitText(text, opts.deltaChars ?? 8);
    const record = { body, deltasSent: 0, deltasTotal: deltas.length, closedEarly: false };
    requests.push(record);
    const status = opts.failFirst?.[requests.length - 1];
    if (status !== undefined && status !== 200) {
      res.writeHead(status, { "content-type": "application/json", "x-should-retry": "true" });
      res.end(
        JSON.stringify({ error: { message: `fake ${status}`, type: "server_error", code: null } }),
      );
      return;
    }
    const answer: Answer = {
      record,
      deltas,
      text,
      model: body.model ?? "gpt-4o",
      toolCalls: opts.toolCalls ?? [],
      errorAfter: opts.errorAfter?.[requests.length - 1],
      usage: {
        prompt: opts.promptTokens ?? 11,
        completion: Math.ceil(text.length / 4),
        cached: opts.cachedTokens ?? 0,
        written: opts.cacheWriteTokens ?? 0,
      },
    };
    if (req.url?.endsWith("/responses")) {
      if (body.stream) await responsesStream(res, answer);
      else json(res, response(answer, "completed"));
    } else if (body.stream) {
      await chatStream(res, answer);
    } else {
      json(res, completion(answer));
    }
  });

  /** Writes the deltas at the set rate; false when the client left or the stream failed. */
  async function streamDeltas(
    a: Answer,
    write: (delta: string) => void,
    fail: () => void,
  ): Promise<boolean> {
    for (const delta of a.deltas) {
      if (a.record.closedEarly) return false;
      if (opts.deltaMs) await new Promise((r) => setTimeout(r, opts.deltaMs));
      if (a.record.closedEarly) return false;
      if (a.errorAfter !== undefined && a.record.deltasSent >= a.errorAfter) {
        fail();
        return false;
      }
      write(delta);
      a.record.deltasSent++;
    }
    return true;
  }

  async function chatStream(res: ServerResponse, a: Answer): Promise<void> {
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
    const whole = await streamDeltas(
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

  async function responsesStream(res: ServerResponse, a: Answer): Promise<void> {
    const end = openStream(res, a.record);
    let seq = 0;
    const send = (type: string, data: Record<string, unknown>) =>
      res.write(
        `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`,
      );
    send("response.created", { response: response(a, "in_progress") });
    const whole = await streamDeltas(
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

  return {
    baseURL: `http://127.0.0.1:${server.port}/v1`,
    requests,
    set(next) {
      opts = next;
    },
    close: () => server.close(),
  };
}

function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

function chatUsage(a: Answer) {
  return {
    prompt_tokens: a.usage.prompt,
    completion_tokens: a.usage.completion,
    total_tokens: a.usage.prompt + a.usage.completion,
    prompt_tokens_details: { cached_tokens: a.usage.cached, cache_write_tokens: a.usage.written },
  };
}

function completion(a: Answer) {
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
function response(a: Answer, status: "in_progress" | "completed") {
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
