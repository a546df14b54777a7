/**
 * The web dashboard (issue 11): one HTML page, its script and styles, and a JSON API over a
 * runtime, on `node:http` with no build step. `loom ui` starts it; see docs/ui.md. Its routes
 * are the table of routes.ts; its access token is auth.ts's.
 *
 * Invariants (tests cite S1..S5):
 * S1. It binds 127.0.0.1 unless told otherwise. Reaching the port is not enough: every request
 *     needs the token (auth.ts A1), loopback included, since the dashboard shows what the codec
 *     sealed and can resume a gated suspend.
 * S2. A request whose Host is not this server's (a DNS-rebinding page) is refused 403, reads
 *     included, when it listens on a loopback or a named address.
 * S3. A POST whose Origin header is present and is not this server's own origin is refused 403
 *     before its body is read (CSRF); with the JSON-only bodies of http.ts H2, no CORS headers
 *     and a SameSite=Strict cookie, another site can make no write.
 * S4. Nothing a client sends crashes the server: a handler's failure is answered as data
 *     (http.ts H1), and `close()` ends live streams and connections and resolves when the
 *     server is closed (the runtime stays the caller's).
 * S5. `readOnly` serves no writes: the write routes are not in its table (routes.ts P2), so they
 *     answer 404 even with the token, and the page it serves says so, so the script draws no
 *     forms.
 */
import { InvalidInputError } from "../kernel/errors.ts";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Runtime } from "../runtime/runtime.ts";
import { checkToken, newToken, SIGN_IN_PATH, TokenGate } from "./auth.ts";
import { HttpRefusal, sendError } from "./http.ts";
import { LiveStreams } from "./live.ts";
import { route, routesFor, type Route } from "./routes.ts";

export interface UiServer {
  /** Where it listens, with no token: what to show or log. */
  url: string;
  /** The URL that signs a browser in (auth.ts A3): it holds the token, so print it once. */
  signInUrl: string;
  /** The access token: send it as `Authorization: Bearer <token>` (auth.ts A1). */
  token: string;
  close(): Promise<void>;
}

export interface UiServerOptions {
  runtime: Runtime;
  port: number;
  host?: string;
  /**
   * More host names the dashboard is reached by (a proxy's, a machine's name). Required when
   * `host` is a wildcard (0.0.0.0, ::): a server that answered any Host would be open to DNS
   * rebinding, which turns a web page into a writer of your executions.
   */
  allowHosts?: readonly string[];
  /** The access token (auth.ts A4); a random one is made when it is absent. */
  token?: string;
  /** S5: serve no cancel, resume or send. */
  readOnly?: boolean;
}

/** What a request is served with. */
interface Served {
  runtime: Runtime;
  live: LiveStreams;
  routes: readonly Route[];
  readOnly: boolean;
  /** Known once the port is (S2, auth.ts A3); no request is served before that. */
  hosts?: ReadonlySet<string>;
  gate?: TokenGate;
}

/**
 * Serves the dashboard for `runtime` on `host:port` (port 0: any free one; host 127.0.0.1).
 *
 * @example
 * const ui = await startUiServer({ runtime, port: 7070 });
 * console.log(`sign in at ${ui.signInUrl}`); // http://127.0.0.1:7070/auth?token=...
 */
export async function startUiServer(opts: UiServerOptions): Promise<UiServer> {
  const host = opts.host ?? "127.0.0.1";
  const extra = opts.allowHosts ?? [];
  if (isWildcard(host) && extra.length === 0) {
    throw new InvalidInputError(
      `a dashboard bound to every address (${host || "0.0.0.0"}) needs allowHosts: the host names it is reached by (DNS rebinding)`,
    );
  }
  const token = opts.token === undefined ? newToken() : checkToken(opts.token, "the token option");
  const readOnly = opts.readOnly === true;
  const live = new LiveStreams();
  const s: Served = { runtime: opts.runtime, live, routes: routesFor(readOnly), readOnly };
  const server = createServer((req, res) => {
    handle(s, req, res).catch((e: unknown) => {
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
  s.hosts = allowedHosts(host, port, extra);
  s.gate = new TokenGate(token, port);
  const url = `http://${hostPart(host)}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    signInUrl: `${url}${SIGN_IN_PATH}?token=${token}`,
    token,
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

async function handle(s: Served, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const hostHeader = (req.headers.host ?? "").toLowerCase();
  if (s.hosts && !s.hosts.has(hostHeader)) {
    throw new HttpRefusal(403, "LOOM_FORBIDDEN_HOST", `host ${hostHeader} is not this server`);
  }
  const url = new URL(req.url ?? "/", "http://ui.invalid");
  const method = req.method ?? "GET";
  const query = url.pathname === SIGN_IN_PATH ? url.searchParams.get("token") : null;
  if (!s.gate) throw new HttpRefusal(503, "LOOM_NOT_READY", "the dashboard is starting");
  s.gate.check(req, query ?? undefined); // A1: before anything else is looked at
  if (method === "POST") checkOrigin(req.headers.origin, hostHeader);
  const found = route(s.routes, method, url.pathname);
  await found.route.handle({
    runtime: s.runtime,
    live: s.live,
    req,
    res,
    url,
    id: found.id,
    readOnly: s.readOnly,
    signInCookie: query === null ? undefined : s.gate.cookie(),
  });
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
