/**
 * The HTTP worker server (ADR 0020 K8.5): runs executions dispatched to it on a runtime in this
 * process, over `node:http`.
 *
 * - `POST /dispatch` `{ executionId, flow, input? }`: starts the execution (or attaches to it,
 *   S1) and answers 202 `{ executionId }` once its start is durable. The outcome is not in the
 *   answer: the client reads it from the log (S2: delivery is best effort; settlement is by the
 *   durable fact).
 * - `POST /cancel` `{ executionId, reason? }`: aborts the execution's in-flight work here at once
 *   and makes sure its EXECUTION_CANCELLED fact exists; 200 `{ executionId, cancelled }`, where
 *   `cancelled` is true when this request ended it.
 * - `GET /health`: 200 `{ ok: true, owner, active }`, `active` being the executions dispatched
 *   here that have not settled.
 *
 * Invariants (tests cite H1..H4):
 * H1. Every request to an endpoint, /health included, is authenticated (signing.ts A1) before
 *     its body is parsed or anything is read or changed; a refused one gets 401 and changes
 *     nothing. (A path or method no endpoint has gets 404 or 405 at once: it reads nothing.)
 * H2. A body over `maxBodyBytes` gets 413; one that is not UTF-8 JSON of the endpoint's shape
 *     gets 400 with a message naming what is wrong. Neither changes anything.
 * H3. Errors are answered as data (wire.ts), with the status their code implies.
 * H4. Nothing a client sends can crash the server: every handler's failure becomes an answer,
 *     and a failure to answer (the client went away) is dropped.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Clock } from "../kernel/clock.ts";
import { InvalidInputError, ensureError, type LoomError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { LocalWorkerRuntime } from "./local-worker.ts";
import { MAX_BODY_BYTES, parseBody, readSignedBody } from "./request-body.ts";
import { checkedSecret } from "./signing.ts";
import { errorBody, statusOf } from "./wire.ts";
import { checkedCancel, checkedDispatch, reasonText } from "./worker-runtime.ts";

export interface WorkerServerOptions {
  /** The runtime executions run on; it has the flows registered and its background loop on. */
  runtime: Runtime;
  /** The secret shared with the orchestrator (at least 16 characters). */
  secret: string;
  /** Judges request timestamps (default: the runtime's clock). */
  clock?: Clock;
  /** The largest request body read (default 1 MiB). */
  maxBodyBytes?: number;
  /** How long a request may take to arrive, headers and body (default 30 s). */
  requestTimeoutMs?: number;
  /** Failures no request is waiting for (an outcome that could not be read). */
  onError?: (error: Error) => void;
}

export interface WorkerServer {
  readonly server: Server;
  /** Executions dispatched here that have not settled. */
  readonly active: number;
  /** Listens on `port` (0: any free one) of `host` (default 127.0.0.1); resolves with the URL. */
  listen(port: number, host?: string): Promise<string>;
  /** Stops listening and closes every connection; the runtime stays open (its owner closes it). */
  close(): Promise<void>;
}

interface Answer {
  status: number;
  body: Json;
}

type Handler = (body: unknown) => Promise<Answer>;

export function createWorkerServer(options: WorkerServerOptions): WorkerServer {
  const secret = checkedSecret(options.secret, "a worker server");
  const runtime = options.runtime;
  const clock = options.clock ?? runtime.clock;
  const maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
  const report = options.onError ?? ((e: Error) => runtime.report(e));
  const local = new LocalWorkerRuntime(runtime);
  const active = new Set<string>();

  const routes: Record<string, Record<string, Handler>> = {
    "/dispatch": {
      POST: async (body) => {
        const id = await local.accept(checkedDispatch(body));
        if (!active.has(id)) {
          active.add(id);
          // Only to count it: the outcome reaches the client through the log, not through here.
          local
            .outcome(id)
            .catch((e: unknown) => {
              if (!isClosed(e)) report(ensureError(e));
            })
            .finally(() => active.delete(id));
        }
        return { status: 202, body: { executionId: id } };
      },
    },
    "/cancel": {
      POST: async (body) => {
        const request = checkedCancel(body);
        const why = reasonText(request.reason);
        const cancelled = await runtime.cancel(request.executionId, why);
        return { status: 200, body: { executionId: request.executionId, cancelled } };
      },
    },
    "/health": {
      GET: async () => ({
        status: 200,
        body: { ok: true, owner: runtime.ownerId, active: active.size },
      }),
    },
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const endpoint = Object.hasOwn(routes, path) ? routes[path] : undefined;
    const handler =
      endpoint && Object.hasOwn(endpoint, req.method ?? "")
        ? endpoint[req.method ?? ""]
        : undefined;
    if (!endpoint || !handler) {
      req.resume();
      const allowed = endpoint ? Object.keys(endpoint).join(", ") : undefined;
      const error = new InvalidInputError(
        endpoint ? `${path} takes ${allowed}, not ${req.method}` : `no endpoint ${path}`,
      );
      return send(res, endpoint ? 405 : 404, errorBody(error), allowed);
    }
    const read = await readSignedBody(req, { secret, nowMs: () => clock.now(), maxBodyBytes });
    if (!read.ok) return send(res, statusOf(read.error), errorBody(read.error));
    try {
      const answer = await handler(req.method === "GET" ? undefined : parseBody(read.text));
      send(res, answer.status, answer.body);
    } catch (e) {
      send(res, statusOf(e), errorBody(e));
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      // A request that broke off while its body was read (H4): answer if it still can be.
      send(res, 400, errorBody(asRequestError(e)));
    });
  });
  server.requestTimeout = options.requestTimeoutMs ?? 30_000;

  return {
    server,
    get active() {
      return active.size;
    },
    listen(port, host = "127.0.0.1") {
      return new Promise<string>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          const address = server.address() as AddressInfo;
          const name = address.family === "IPv6" ? `[${address.address}]` : address.address;
          resolve(`http://${name}:${address.port}`);
        });
      });
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

function send(res: ServerResponse, status: number, body: Json, allow?: string): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  const headers: Record<string, string | number> = {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
  };
  if (allow !== undefined) headers.allow = allow;
  res.writeHead(status, headers).end(text);
}

function asRequestError(e: unknown): LoomError {
  return new InvalidInputError(`the request could not be read: ${ensureError(e).message}`);
}

function isClosed(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === "LOOM_RUNTIME_CLOSED";
}
