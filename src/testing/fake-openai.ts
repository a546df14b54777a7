/**
 * A local server that speaks OpenAI's Chat Completions API (`POST /v1/chat/completions`), for
 * tests and the demo: the official SDK reaches it through `baseURL` (`http://127.0.0.1:PORT/v1`).
 * Streams are the real SSE wire format: data-only lines, `usage: null` on every chunk, a trailing
 * usage chunk with `choices: []` when `stream_options.include_usage` is set, then `[DONE]`.
 *
 * Set per server: the text, characters per delta, milliseconds between deltas, the usage it
 * reports, and statuses for the first requests. It records every request and early closes.
 */
import type { ServerResponse } from "node:http";
import { openStream, serveJson, splitText } from "./fake-server.ts";
import type { FakeRequest } from "./fake-anthropic.ts";

export interface FakeOpenAiOptions {
  text?: string;
  deltaChars?: number;
  deltaMs?: number;
  promptTokens?: number;
  cachedTokens?: number;
  failFirst?: number[];
}

export interface FakeOpenAi {
  /** Includes `/v1`, as the SDK wants it. */
  baseURL: string;
  requests: (FakeRequest & { body: { stream_options?: { include_usage?: boolean } } })[];
  set(options: FakeOpenAiOptions): void;
  close(): Promise<void>;
}

export async function fakeOpenAi(options: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
  let opts = options;
  const requests: FakeOpenAi["requests"] = [];
  const server = await serveJson(async (parsed, req, res) => {
    const body = parsed as FakeOpenAi["requests"][number]["body"];
    const text = opts.text ?? "Tides rise and fall twice a day.";
    const deltas = splitText(text, opts.deltaChars ?? 8);
    const record = {
      body,
      deltasSent: 0,
      deltasTotal: deltas.length,
      closedEarly: false,
    } as FakeOpenAi["requests"][number];
    requests.push(record);
    const status = opts.failFirst?.[requests.length - 1];
    if (status !== undefined && status !== 200) {
      res.writeHead(status, { "content-type": "application/json", "x-should-retry": "true" });
      res.end(
        JSON.stringify({ error: { message: `fake ${status}`, type: "server_error", code: null } }),
      );
      return;
    }
    const model = body.model ?? "gpt-4o";
    const usage = {
      prompt_tokens: opts.promptTokens ?? 11,
      completion_tokens: Math.ceil(text.length / 4),
      total_tokens: (opts.promptTokens ?? 11) + Math.ceil(text.length / 4),
      prompt_tokens_details: { cached_tokens: opts.cachedTokens ?? 0 },
    };
    const base = { id: "chatcmpl-fake", created: 1, model };
    if (req.url?.endsWith("/responses")) return responses(res, record, deltas, text, model, usage);
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          ...base,
          object: "chat.completion",
          choices: [
            { index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" },
          ],
          usage,
        }),
      );
      return;
    }
    const end = openStream(res, record);
    const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
    const chunk = (delta: unknown, finish: string | null) => ({
      ...base,
      object: "chat.completion.chunk",
      choices: [{ index: 0, delta, finish_reason: finish }],
      usage: null,
    });
    send(chunk({ role: "assistant", content: "" }, null));
    for (const delta of deltas) {
      if (record.closedEarly) return;
      if (opts.deltaMs) await new Promise((r) => setTimeout(r, opts.deltaMs));
      if (record.closedEarly) return;
      send(chunk({ content: delta }, null));
      record.deltasSent++;
    }
    send(chunk({}, "stop"));
    if (body.stream_options?.include_usage) {
      send({ ...base, object: "chat.completion.chunk", choices: [], usage });
    }
    res.write("data: [DONE]\n\n");
    end();
  });

  /** The Responses API (`POST /v1/responses`, streaming): text deltas, usage on completion. */
  async function responses(
    res: ServerResponse,
    record: FakeOpenAi["requests"][number],
    deltas: string[],
    text: string,
    model: string,
    usage: {
      prompt_tokens: number;
      completion_tokens: number;
      prompt_tokens_details: { cached_tokens: number };
    },
  ): Promise<void> {
    const end = openStream(res, record);
    let seq = 0;
    const send = (type: string, data: Record<string, unknown>) =>
      res.write(
        `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`,
      );
    const response = { id: "resp_fake", object: "response", created_at: 1, model, output: [] };
    send("response.created", { response: { ...response, status: "in_progress" } });
    for (const delta of deltas) {
      if (record.closedEarly) return;
      if (opts.deltaMs) await new Promise((r) => setTimeout(r, opts.deltaMs));
      if (record.closedEarly) return;
      send("response.output_text.delta", {
        item_id: "msg_fake",
        output_index: 0,
        content_index: 0,
        delta,
      });
      record.deltasSent++;
    }
    send("response.completed", {
      response: {
        ...response,
        status: "completed",
        output: [
          {
            id: "msg_fake",
            type: "message",
            role: "assistant",
            status: "completed",
            content: [{ type: "output_text", text, annotations: [] }],
          },
        ],
        usage: {
          input_tokens: usage.prompt_tokens,
          input_tokens_details: { cached_tokens: usage.prompt_tokens_details.cached_tokens },
          output_tokens: usage.completion_tokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: usage.prompt_tokens + usage.completion_tokens,
        },
      },
    });
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
