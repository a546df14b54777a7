/**
 * The web dashboard (issue 11): one HTML page, its script and styles, and a JSON API over a
 * runtime, on `node:http` with no build step. `loom ui` starts it; see docs/ui.md.
 *
 * Routes: `GET /` (the page; client-side routing by hash), `GET /assets/app.js`,
 * `GET /assets/app.css`, `GET /api/executions` (list.ts), `GET /api/executions/:id` (detail.ts),
 * `GET /api/executions/:id/live` (live.ts), `POST /api/executions/:id/{cancel,resume,send}`
 * (actions.ts). An id is one URL-encoded path segment (ids may hold `/`).
 *
 * Invariants (tests cite S1..S4):
 * S1. It binds 127.0.0.1 unless told otherwise, and has no authentication: whoever reaches the
 *     port can cancel executions. Do not expose it.
 * S2. A request whose Host is not this server's (a DNS-rebinding page) is refused 403, reads
 *     included, when it listens on a loopback or a named address.
 * S3. A POST whose Origin header is present and is not this server's own origin is refused 403
 *     before its body is read (CSRF); with the JSON-only bodies of http.ts H2 and no CORS
 *     headers, another site can make no write.
 * S4. Nothing a client sends crashes the server: a handler's failure is answered as data
 *     (http.ts H1), and `close()` ends live streams and connections and resolves when the
 *     server is closed (the runtime stays the caller's).
 */
import { InvalidInputError } from "../kernel/errors.ts";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Runtime } from "../runtime/runtime.ts";
import { ACTIONS, runAction, type Action } from "./actions.ts";
import { APP_CSS } from "./assets/styles.ts";
import { APP_JS } from "./assets/app.ts";
import { executionDetail } from "./detail.ts";
import { HttpRefusal, readJsonBody, sendError, sendJson, sendText } from "./http.ts";
import { listPage } from "./list.ts";
import { LiveStreams } from "./live.ts";
import { PAGE_HTML } from "./page.ts";

export interface UiServer {
  url: string;
  close(): Promise<void>;
}

/**
 * Serves the dashboard for `runtime` on `host:port` (port 0: any free one; host 127.0.0.1).
 *
 * @example
 * const ui = await startUiServer({ runtime, port: 7070 });
 * console.log(`dashboard at ${ui.url}`); // http://127.0.0.1:7070
 */
export async function startUiServer(opts: {
  runtime: Runtime;
  port: number;
  host?: string;
  /**
   * More host names the dashboard is reached by (a proxy's, a machine's name). Required when
   * `host` is a wildcard (0.0.0.0, ::): a server that answered any Host would be open to DNS
   * rebinding, which turns a web page into a writer of your executions.
   */
  allowHosts?: readonly string[];
}): Promise<{ url: string; close(): Promise<void> }> {
  const host = opts.host ?? "127.0.0.1";
  const extra = opts.allowHosts ?? [];
  if (isWildcard(host) && extra.length === 0) {
    throw new InvalidInputError(
      `a dashboard bound to every address (${host || "0.0.0.0"}) needs allowHosts: the host names it is reached by (DNS rebinding)`,
    );
  }
  const live = new LiveStreams();
  // The Host values are known once the port is (S2); no request is served before that.
  const bound: { hosts?: ReadonlySet<string> } = {};
  const server = createServer((req, res) => {
    handle(opts.runtime, live, bound.hosts, req, res).catch((e: unknown) => {
      if (!res.headersSent) sendError(res, e);
      else res.destroy();
    });
  });
  server.on("clientError", (_e, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  bound.hosts = allowedHosts(host, port, extra);
  const url = `http://${hostPart(host)}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    close() {
      closing ??= new Promise<void>((resolve) => {
        live.closeAll();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

async function handle(
  runtime: Runtime,
  live: LiveStreams,
  hosts: ReadonlySet<string> | undefined,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const hostHeader = (req.headers.host ?? "").toLowerCase();
  if (hosts && !hosts.has(hostHeader)) {
    throw new HttpRefusal(403, "LOOM_FORBIDDEN_HOST", `host ${hostHeader} is not this server`);
  }
  const url = new URL(req.url ?? "/", "http://ui.invalid");
  const method = req.method ?? "GET";
  if (method === "POST") checkOrigin(req.headers.origin, hostHeader);
  const parts = url.pathname.split("/").slice(1);
  if (parts[0] !== "api") {
    allow(method, ["GET", "HEAD"]);
    if (url.pathname === "/" || url.pathname === "/index.html") {
      return sendText(res, "text/html", PAGE_HTML);
    }
    if (url.pathname === "/assets/app.js") return sendText(res, "text/javascript", APP_JS);
    if (url.pathname === "/assets/app.css") return sendText(res, "text/css", APP_CSS);
    throw new HttpRefusal(404, "LOOM_NOT_FOUND", `no page at ${url.pathname}`);
  }
  if (parts[1] !== "executions" || parts.length > 4) throw notFound(url.pathname);
  if (parts.length === 2) {
    allow(method, ["GET"]);
    return sendJson(res, 200, await listPage(runtime.store, url.searchParams));
  }
  const id = segment(parts[2] ?? "");
  const sub = parts[3];
  if (sub === undefined) {
    allow(method, ["GET"]);
    return sendJson(res, 200, await executionDetail(runtime, id));
  }
  if (sub === "live") {
    allow(method, ["GET"]);
    const from = url.searchParams.get("from");
    const fromSeq = from === null ? undefined : /^\d{1,15}$/.test(from) ? Number(from) : -1;
    if (fromSeq !== undefined && fromSeq < 0) {
      throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "from must be a sequence number >= 0");
    }
    return live.serve(runtime, id, fromSeq, req, res);
  }
  if (!(ACTIONS as readonly string[]).includes(sub)) throw notFound(url.pathname);
  allow(method, ["POST"]);
  const body = await readJsonBody(req);
  sendJson(res, 200, await runAction(runtime, sub as Action, id, body));
}

/** S3 */
function checkOrigin(origin: string | undefined, hostHeader: string): void {
  if (origin === undefined) return;
  if (origin.toLowerCase() === `http://${hostHeader}`) return;
  throw new HttpRefusal(
    403,
    "LOOM_FORBIDDEN_ORIGIN",
    `a POST from origin ${origin} is refused: only this dashboard's own page may write`,
  );
}

/**
 * S2: the Host values this server answers to: its address and port (unless a wildcard), the other
 * names of the loopback when it listens there, and the names the caller allowed.
 */
function allowedHosts(host: string, port: number, extra: readonly string[]): ReadonlySet<string> {
  const names = isWildcard(host) ? [] : [hostPart(host)];
  if (host === "127.0.0.1" || host === "localhost" || host === "::1") {
    names.push("127.0.0.1", "localhost", "[::1]");
  }
  names.push(...extra.map(hostPart));
  return new Set(names.map((n) => `${n.toLowerCase()}:${port}`));
}

function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "";
}

const hostPart = (host: string): string => (host.includes(":") ? `[${host}]` : host);

function allow(method: string, methods: readonly string[]): void {
  if (!methods.includes(method)) {
    throw new HttpRefusal(405, "LOOM_METHOD_NOT_ALLOWED", `${method} is not allowed here`);
  }
}

function notFound(path: string): HttpRefusal {
  return new HttpRefusal(404, "LOOM_NOT_FOUND", `no endpoint at ${path}`);
}

function segment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "the execution id is not valid URL encoding");
  }
}
