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
 * reports, statuses for the first requests, an error midway through the first streams, tool
 * calls to end the answer with, and the model it says answered. It records every request and early closes. This module judges
 * each request; what is written for it is fake-openai-streams.ts's.
 */
import type { ServerResponse } from "node:http";
import type { FakeRequest } from "./fake-anthropic.ts";
import {
  chatStream,
  completion,
  response,
  responsesStream,
  type Answer,
} from "./fake-openai-streams.ts";
import { serveJson, splitText, type FakeToolCall } from "./fake-server.ts";

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
  /** The model every chunk and Response names. Default: the one asked for. */
  model?: string;
  /**
   * A provider's tokens-per-window limit (issue 26): each request's output tokens count at its
   * arrival; one that would pass `outputTokens` within the last `windowMs` is answered 429 with a
   * `retry-after-ms` (and counts nothing). Every answered request is kept in `arrivals`.
   */
  rateLimit?: { outputTokens: number; windowMs: number };
  /**
   * Options for one request, over these, from its body (a script: tool calls until the
   * conversation holds their results, then text).
   */
  respond?: (body: { messages?: unknown; input?: unknown }) => FakeOpenAiOptions | undefined;
}

export interface FakeOpenAi {
  /** Includes `/v1`, as the SDK wants it. */
  baseURL: string;
  requests: (FakeRequest & { body: { stream_options?: { include_usage?: boolean } } })[];
  /**
   * With `rateLimit`: each request answered (its arrival, its output tokens, its last message's
   * text), and the 429s.
   */
  arrivals: { atMs: number; outputTokens: number; prompt: string }[];
  refused: number;
  set(options: FakeOpenAiOptions): void;
  close(): Promise<void>;
}

type OpenAiRequest = FakeOpenAi["requests"][number];

export async function fakeOpenAi(options: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
  let given = options;
  const requests: FakeOpenAi["requests"] = [];
  const limited: Pick<FakeOpenAi, "arrivals" | "refused"> = { arrivals: [], refused: 0 };
  const server = await serveJson(async (parsed, req, res) => {
    const body = parsed as OpenAiRequest["body"];
    const opts = { ...given, ...given.respond?.(body) };
    const text = opts.text ?? "Tides rise and fall twice a day.";
    const prompt = lastContent(body.messages);
    const tokens = Math.ceil(text.length / 4);
    if (opts.rateLimit && overLimit(opts.rateLimit, limited, { tokens, prompt }, res)) return;
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
      model: opts.model ?? body.model ?? "gpt-4o",
      toolCalls: opts.toolCalls ?? [],
      errorAfter: opts.errorAfter?.[requests.length - 1],
      deltaMs: () => opts.deltaMs,
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

  return {
    baseURL: `http://127.0.0.1:${server.port}/v1`,
    requests,
    get arrivals() {
      return limited.arrivals;
    },
    get refused() {
      return limited.refused;
    },
    set(next) {
      given = next;
    },
    close: () => server.close(),
  };
}

/** The text of a request's last message, or "". */
function lastContent(messages: unknown): string {
  const last: unknown = Array.isArray(messages) ? messages.at(-1) : undefined;
  const content =
    typeof last === "object" && last !== null ? (last as { content?: unknown }).content : "";
  return typeof content === "string" ? content : "";
}

/** The fake's tokens-per-window limit: true (and a 429 written) when this request passes it. */
function overLimit(
  limit: { outputTokens: number; windowMs: number },
  state: Pick<FakeOpenAi, "arrivals" | "refused">,
  asked: { tokens: number; prompt: string },
  res: ServerResponse,
): boolean {
  const outputTokens = asked.tokens;
  const now = Date.now();
  const inWindow = state.arrivals.filter((a) => a.atMs > now - limit.windowMs);
  const used = inWindow.reduce((sum, a) => sum + a.outputTokens, 0);
  if (used + outputTokens <= limit.outputTokens) {
    state.arrivals.push({ atMs: now, outputTokens, prompt: asked.prompt });
    return false;
  }
  state.refused++;
  const oldest = inWindow[0]?.atMs ?? now;
  res.writeHead(429, {
    "content-type": "application/json",
    "retry-after-ms": String(Math.max(1, oldest + limit.windowMs - now)),
  });
  res.end(
    JSON.stringify({
      error: {
        message: `Rate limit reached on tokens per min (TPM): Limit ${limit.outputTokens}, Used ${used}, Requested ${outputTokens}.`,
        type: "tokens",
        param: null,
        code: "rate_limit_exceeded",
      },
    }),
  );
  return true;
}

function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}
