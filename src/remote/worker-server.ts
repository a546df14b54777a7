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
 *   here that have not settled (active-executions.ts: counted when asked, never watched).
 *
 * Invariants (tests cite H1..H7):
 * H1. Every request to an endpoint, /health included, is authenticated from its headers
 *     (signing.ts A1) before a byte of its body is read or anything is changed; a refused one
 *     gets 401 and changes nothing (request-body.ts B1). A path or method no endpoint has gets
 *     404 or 405 at once.
 * H2. A body over `maxBodyBytes` gets 413; one that is not UTF-8 JSON of the endpoint's shape,
 *     or nests too deep, gets 400 with a message naming what is wrong. Neither changes anything.
 * H3. Errors are answered as data (wire.ts), with the status their code implies. Every answer
 *     to an authentic request is signed (signing.ts A6); a 401, 404 or 405 is not.
 * H4. Nothing a client sends can crash the server: every handler's failure becomes an answer,
 *     and a failure to answer (the client went away) is dropped.
 * H5. What clients can hold is bounded per client address: `maxConnections` connections from
 *     one address (more are closed as they arrive), `maxUnverifiedBytes` of bodies held before
 *     their digest is checked (B3); and for everyone: `maxTotalConnections` connections,
 *     `requestTimeoutMs` for a request to arrive whole (headers within it too). A client without
 *     the secret holds no body at all (B1), so what it can hold from one address leaves the
 *     others served.
 * H6. Once the runtime is closed every endpoint answers 503, /health included. `close()`
 *     resolves when nothing of the server runs any more: no connection, no handler, no count.
 * H7. With `tls` (a certificate and its key, PEM) the server speaks HTTPS only; its URL is
 *     `https://`. Without it the seam is plain HTTP: for a trusted network or loopback only.
 *
 * What each endpoint does is worker-routes.ts's; this module is the HTTP around it.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { InvalidInputError, ensureError, type LoomError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { ActiveExecutions } from "./active-executions.ts";
import { LocalWorkerRuntime } from "./local-worker.ts";
import {
  MAX_BODY_BYTES,
  MAX_UNVERIFIED_BYTES,
  UnverifiedBytes,
  parseBody,
  type BodyLimits,
  readSignedBody,
} from "./request-body.ts";
import {
  NonceLedger,
  answerSignature,
  checkedAudience,
  checkedSecret,
  SIGNATURE_HEADER,
  type RequestSigning,
} from "./signing.ts";
import { errorBody, statusOf } from "./wire.ts";
import { workerRoutes, type Routes } from "./worker-routes.ts";

export interface WorkerServerOptions {
  /** The runtime executions run on; it has the flows registered and its background loop on. */
  runtime: Runtime;
  /** The secret shared with the orchestrator (at least 16 characters). */
  secret: string;
  /** The largest request body read (default 1 MiB). */
  maxBodyBytes?: number;
  /** The most body bytes held per client address before their digest is checked (16 MiB). */
  maxUnverifiedBytes?: number;
  /** The most connections open at once from one client address; more are closed (default 64). */
  maxConnections?: number;
  /** The most connections open at once from everyone; more are closed (default 1024). */
  maxTotalConnections?: number;
  /**
   * The id requests must be signed for (signing.ts A5), the `workerId` its clients are given;
   * default: the origin `listen` resolves with (e.g. `http://127.0.0.1:7070`).
   */
  workerId?: string;
  /** Serve HTTPS with this certificate and its private key (PEM), rather than plain HTTP (H7). */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** How long a request may take to arrive, headers and body (default 30 s). */
  requestTimeoutMs?: number;
  /** Failures no request is waiting for (a count of the active executions that failed). */
  onError?: (error: Error) => void;
}

export interface WorkerServer {
  readonly server: Server;
  /** How many executions dispatched here have not settled, as the store says now. */
  active(): Promise<number>;
  /** Bytes of request bodies held now, from every address, whose digest is not checked yet (H5). */
  readonly unverifiedBytes: number;
  /** Listens on `port` (0: any free one) of `host` (default 127.0.0.1); resolves with the URL. */
  listen(port: number, host?: string): Promise<string>;
  /** Stops listening, closes every connection, and waits for what still runs (H6). */
  close(): Promise<void>;
}

/** The most a request's headers may take, when the request timeout is longer. */
const MAX_HEADERS_TIMEOUT_MS = 10_000;

export function createWorkerServer(options: WorkerServerOptions): WorkerServer {
  const secret = checkedSecret(options.secret, "a worker server");
  const runtime = options.runtime;
  const maxBodyBytes = whole(options.maxBodyBytes ?? MAX_BODY_BYTES, "maxBodyBytes", 1);
  const unverified = new UnverifiedBytes(
    whole(options.maxUnverifiedBytes ?? MAX_UNVERIFIED_BYTES, "maxUnverifiedBytes", maxBodyBytes),
  );
  const maxConnections = whole(options.maxConnections ?? 64, "maxConnections", 1);
  const maxTotal = whole(options.maxTotalConnections ?? 1024, "maxTotalConnections", 1);
  const requestTimeoutMs = whole(options.requestTimeoutMs ?? 30_000, "requestTimeoutMs", 1);
  let audience =
    options.workerId === undefined ? "" : checkedAudience(options.workerId, "a worker server");
  const report = options.onError ?? ((e: Error) => runtime.report(e));
  const local = new LocalWorkerRuntime(runtime);
  const active = new ActiveExecutions(runtime, report);
  const signer: AnswerSigner = { secret, audience: () => audience };

  const handle = requestHandler(workerRoutes(runtime, local, active), signer, {
    secret,
    audience: () => audience,
    nonces: new NonceLedger(),
    maxBodyBytes,
    unverified,
  });

  const running = new Set<Promise<void>>();
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const run = handle(req, res)
      .catch((e: unknown) => {
        // H4: a handler that failed outside its own catch; answer if it still can be.
        send(res, 400, errorBody(asRequestError(e)), { close: true });
      })
      .finally(() => running.delete(run));
    running.add(run);
  };
  const timeouts = {
    requestTimeout: requestTimeoutMs,
    headersTimeout: Math.min(requestTimeoutMs, MAX_HEADERS_TIMEOUT_MS),
    // Node enforces both timeouts on this tick: a tenth of the timeout keeps the cut close to it.
    connectionsCheckingInterval: Math.min(1_000, Math.max(10, Math.floor(requestTimeoutMs / 10))),
  };
  const server: Server = options.tls
    ? createTlsServer({ ...timeouts, cert: options.tls.cert, key: options.tls.key }, onRequest)
    : createServer(timeouts, onRequest);
  server.maxConnections = maxTotal;
  limitPerAddress(server, maxConnections);
  const scheme = options.tls ? "https" : "http";

  return {
    server,
    active: () => active.count(),
    get unverifiedBytes() {
      return unverified.held;
    },
    async listen(port, host = "127.0.0.1") {
      const url = await listenOn(server, port, host, scheme);
      if (audience === "") audience = url;
      return url;
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
      await Promise.allSettled([...running]);
      await active.close();
    },
  };
}

/** H5: closes a connection that would give its client address more than `max` open at once. */
function limitPerAddress(server: Server, max: number): void {
  const open = new Map<string, number>();
  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "";
    const count = open.get(address) ?? 0;
    if (count >= max) {
      socket.destroy();
      return;
    }
    open.set(address, count + 1);
    socket.once("close", () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

/** What signs the answers to authentic requests (H3, signing.ts A6). */
interface AnswerSigner {
  secret: string;
  audience: () => string;
}

/**
 * Answers one request: 404 or 405 for what no endpoint takes, then the headers authenticated and
 * the body read (H1, H2), then the endpoint's handler, whose failure is answered as data (H3).
 */
function requestHandler(
  routes: Routes,
  signer: AnswerSigner,
  limits: BodyLimits,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return async (req, res) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const endpoint = Object.hasOwn(routes, path) ? routes[path] : undefined;
    const handler =
      endpoint && Object.hasOwn(endpoint, req.method ?? "")
        ? endpoint[req.method ?? ""]
        : undefined;
    if (!endpoint || !handler) {
      const allowed = endpoint ? Object.keys(endpoint).join(", ") : undefined;
      const error = new InvalidInputError(
        endpoint ? `${path} takes ${allowed}, not ${req.method}` : `no endpoint ${path}`,
      );
      return send(res, endpoint ? 405 : 404, errorBody(error), { close: true, allow: allowed });
    }
    const read = await readSignedBody(req, limits);
    const signed = read.signing && { signer, signing: read.signing };
    if (!read.ok) {
      return send(res, statusOf(read.error), errorBody(read.error), { close: true, signed });
    }
    try {
      const answer = await handler(req.method === "GET" ? undefined : parseBody(read.text));
      send(res, answer.status, answer.body, { signed });
    } catch (e) {
      send(res, statusOf(e), errorBody(e), { signed });
    }
  };
}

/** Listens on `port` of `host`; resolves with the server's URL. */
function listenOn(server: Server, port: number, host: string, scheme: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      const address = server.address() as AddressInfo;
      const name = address.family === "IPv6" ? `[${address.address}]` : address.address;
      resolve(`${scheme}://${name}:${address.port}`);
    });
  });
}

function send(
  res: ServerResponse,
  status: number,
  body: Json,
  options: {
    close?: boolean;
    allow?: string | undefined;
    signed?: { signer: AnswerSigner; signing: RequestSigning } | undefined;
  } = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  const headers: Record<string, string | number> = {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
  };
  if (options.allow !== undefined) headers.allow = options.allow;
  if (options.signed) {
    const { signer, signing } = options.signed;
    const audience = signer.audience();
    headers[SIGNATURE_HEADER] = answerSignature(signer.secret, {
      audience,
      nonce: signing.nonce,
      status,
      body: text,
    });
  }
  // A refused request's connection is closed: what its client still sends is never read.
  if (options.close) headers.connection = "close";
  res.writeHead(status, headers).end(text);
}

function whole(value: number, name: string, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new InvalidInputError(`${name} must be a whole number >= ${min}, got ${value}`);
  }
  return value;
}

function asRequestError(e: unknown): LoomError {
  return new InvalidInputError(`the request could not be read: ${ensureError(e).message}`);
}
