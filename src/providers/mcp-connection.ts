/**
 * One MCP client connection shared by a tool effect's calls, and what the SDK's client leaves to
 * its caller over Streamable HTTP (issue 21 item 7).
 *
 * - C1 Connect and initialize are bounded by each waiting call's signal: a call that is cancelled
 *   or times out while the connection is being made settles at once, and when the last waiting
 *   call leaves, the attempt is abandoned (its transport closed, so a hung `initialize` holds no
 *   stream).
 * - C2 A call's own HTTP request is told apart from the others by an AsyncLocalStorage scope, and
 *   is made with the call's own abort signal: a call that ends (answered, cancelled, timed out,
 *   failed) aborts its request, so no stream outlives its call.
 * - C3 A call's stream that breaks or ends before the answer came fails that call at once with
 *   the scope's `lost` reason, instead of leaving it to wait out its timeout.
 * - C4 A connection is dropped (closed and forgotten) when it is found lost: the SDK closed it,
 *   a call's stream broke, or the server no longer knows the session (HTTP 404). The next call
 *   makes a new one, which initializes a new session.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

/** What one call of the effect lends its HTTP request (C2, C3). */
export interface CallScope {
  /** Aborted when the call ends: its request and stream are closed. */
  readonly controller: AbortController;
  /** True once the call has its outcome: a stream ending after that is no loss. */
  done: boolean;
  /** Called when the call's stream broke or ended with no answer (C3). */
  lost(): void;
}

const scopes = new AsyncLocalStorage<CallScope>();

/** Runs `fn` (a call's request) with `scope` as the owner of the requests it makes (C2). */
export function inScope<T>(scope: CallScope, fn: () => Promise<T>): Promise<T> {
  return scopes.run(scope, fn);
}

/** The request a call makes is its `tools/call`; a notification sent meanwhile is not it. */
function isToolCall(body: unknown): boolean {
  if (typeof body !== "string" || !body.includes('"tools/call"')) return false;
  try {
    const m = JSON.parse(body) as { method?: unknown; id?: unknown };
    return m.method === "tools/call" && m.id !== undefined;
  } catch {
    return false;
  }
}

/**
 * The `fetch` given to the SDK's HTTP transport: a call's `tools/call` request is made with the
 * call's signal too (C2), and its answer's body is watched for a break before the answer (C3).
 */
export async function scopedFetch(url: string | URL, init?: RequestInit): Promise<Response> {
  const scope = scopes.getStore();
  if (!scope || init?.method !== "POST" || !isToolCall(init.body)) return fetch(url, init);
  const own = scope.controller.signal;
  const signal = init.signal ? AbortSignal.any([init.signal, own]) : own;
  const response = await fetch(url, { ...init, signal });
  if (!response.ok || !response.body) return response;
  return new Response(watched(response.body, scope), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/** `body`, reporting its end or break to `scope` after the SDK has read what came before it. */
function watched(body: ReadableStream<Uint8Array>, scope: CallScope): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  // A timer runs after every microtask: the SDK's parsing of the last chunk (all promise jobs)
  // has delivered an answer by then, if the stream carried one.
  const ended = () => void setTimeout(() => scope.done || scope.lost(), 0);
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          c.close();
          ended();
        } else c.enqueue(value);
      } catch (e) {
        c.error(e);
        ended();
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

interface Attempt {
  made: Promise<Client>;
  readonly abort: AbortController;
  client?: Client;
  waiting: number;
}

/** Makes a client and its transport; connecting it is the connection's job. */
export type MakeClient = () => Promise<{ client: Client; transport: Transport }>;

/** The effect's one connection, made on first use, made again after it is lost (C1, C4). */
export class McpConnection {
  private attempt: Attempt | undefined;
  constructor(private readonly make: MakeClient) {}

  /** The connected client, or the reason `signal` aborted while waiting for it (C1). */
  async acquire(signal: AbortSignal): Promise<{ client: Client; attempt: object }> {
    signal.throwIfAborted();
    const a = (this.attempt ??= this.start());
    a.waiting++;
    try {
      return { client: await untilAborted(a.made, signal), attempt: a };
    } finally {
      a.waiting--;
      if (a.waiting === 0 && !a.client) this.drop(a);
    }
  }

  /** Forgets `attempt` and closes its client (C4); a newer connection is left alone. */
  drop(attempt: object): void {
    const a = attempt as Attempt;
    if (this.attempt === a) this.attempt = undefined;
    a.abort.abort();
    void a.client?.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    const a = this.attempt;
    this.attempt = undefined;
    if (!a) return;
    a.abort.abort();
    const client = await a.made.catch(() => undefined);
    await client?.close();
  }

  private start(): Attempt {
    const abort = new AbortController();
    const a = { abort, waiting: 0 } as Attempt;
    a.made = (async () => {
      const { client, transport } = await this.make();
      client.onclose = () => {
        if (this.attempt === a) this.attempt = undefined;
      };
      abort.signal.throwIfAborted();
      // Abandoned (C1): closing the client closes the transport and its pending requests.
      const onAbort = () => void client.close().catch(() => undefined);
      abort.signal.addEventListener("abort", onAbort, { once: true });
      // No timeout of the SDK's own (60 s): the calls waiting bound it, and abandon it (C1).
      await client.connect(transport, { signal: abort.signal, timeout: 2 ** 31 - 1 });
      a.client = client;
      return client;
    })();
    // A failed connection is not kept: the next call connects again.
    a.made.catch(() => this.attempt === a && (this.attempt = undefined));
    return a;
  }
}

/** `p`, or a rejection with `signal`'s reason the moment it aborts. */
export function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
