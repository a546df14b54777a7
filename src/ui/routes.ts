/**
 * The dashboard's router: every path it serves, as one table, so the server and its tests read
 * the same list (a route added here is one the token gate and the tests see; auth.ts A1).
 *
 * Invariants (tests cite P1..P3):
 * P1. A path matches at most one route: its literal segments, and `:id` for exactly one
 *     URL-encoded segment (an execution id may hold `/`). No route, 404; a route that does not
 *     take the method, 405.
 * P2. Writes (`write: true`) are the only routes that change anything; a read-only server's
 *     table has none, so their paths answer 404 and no write can be reached.
 * P3. The table is the whole surface: the server answers nothing outside it (the token gate
 *     and the Host check run before it is consulted).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Runtime } from "../runtime/runtime.ts";
import { ACTIONS, runAction } from "./actions.ts";
import { APP_CSS } from "./assets/styles.ts";
import { SIGN_IN_PATH } from "./auth.ts";
import { callDetail } from "./call.ts";
import { clientScript } from "./bundle.ts";
import { executionDetail } from "./detail.ts";
import { fleetAnswer, schedulesAnswer, setSchedulePaused } from "./fleet-pages.ts";
import { flowControlAnswer, withWaits } from "./flow-control.ts";
import { HttpRefusal, readJsonBody, SECURITY_HEADERS, sendJson, sendText } from "./http.ts";
import { listPage } from "./list.ts";
import type { LiveStreams } from "./live.ts";
import { flowsAnswer, forkExecution, rerunExecution } from "./made.ts";
import { pageHtml } from "./page.ts";

/** What a route's handler is given. */
export interface RouteContext {
  runtime: Runtime;
  live: LiveStreams;
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** The decoded `:id` segment, or "" when the route has none. */
  id: string;
  readOnly: boolean;
  /** The Set-Cookie value of a sign-in (auth.ts A3), when the request carried the token in its URL. */
  signInCookie: string | undefined;
}

export interface Route {
  path: string;
  methods: readonly string[];
  /** P2 */
  write?: true;
  handle(c: RouteContext): Promise<void> | void;
}

const PAGE = ["GET", "HEAD"] as const;

/** The writes that make a new execution (made.ts). */
const MAKERS = [
  { name: "fork", run: forkExecution },
  { name: "rerun", run: rerunExecution },
] as const;

const page = (c: RouteContext): void => sendText(c.res, "text/html", pageHtml(c.readOnly));

/** Every route of a server that takes writes; `routesFor` drops them for a read-only one. */
export const UI_ROUTES: readonly Route[] = [
  { path: "/", methods: PAGE, handle: page },
  { path: "/index.html", methods: PAGE, handle: page },
  { path: SIGN_IN_PATH, methods: PAGE, handle: signIn },
  {
    path: "/assets/app.js",
    methods: PAGE,
    handle: async (c) => sendText(c.res, "text/javascript", await clientScript()),
  },
  { path: "/assets/app.css", methods: PAGE, handle: (c) => sendText(c.res, "text/css", APP_CSS) },
  {
    path: "/api/executions",
    methods: ["GET"],
    handle: async (c) => {
      const page = await listPage(c.runtime.store, c.url.searchParams, c.runtime.clock.now());
      sendJson(c.res, 200, { ...page, executions: await withWaits(c.runtime, page.executions) });
    },
  },
  {
    path: "/api/executions/:id",
    methods: ["GET"],
    handle: async (c) => sendJson(c.res, 200, await executionDetail(c.runtime, c.id, c.readOnly)),
  },
  {
    path: "/api/executions/:id/call",
    methods: ["GET"],
    handle: async (c) =>
      sendJson(c.res, 200, await callDetail(c.runtime, c.id, c.url.searchParams)),
  },
  { path: "/api/executions/:id/live", methods: ["GET"], handle: live },
  {
    path: "/api/schedules",
    methods: ["GET"],
    handle: async (c) => sendJson(c.res, 200, await schedulesAnswer(c.runtime)),
  },
  ...(["pause", "resume"] as const).map((verb): Route => ({
    path: `/api/schedules/:id/${verb}`,
    methods: ["POST"],
    write: true,
    handle: async (c) => {
      // H2: a JSON body (`{}`), so that a cross-site form cannot post it.
      await readJsonBody(c.req);
      sendJson(c.res, 200, await setSchedulePaused(c.runtime, c.id, verb === "pause"));
    },
  })),
  {
    path: "/api/fleet",
    methods: ["GET"],
    handle: async (c) => sendJson(c.res, 200, await fleetAnswer(c.runtime)),
  },
  {
    path: "/api/flow-control",
    methods: ["GET"],
    handle: async (c) => sendJson(c.res, 200, await flowControlAnswer(c.runtime)),
  },
  {
    path: "/api/flows",
    methods: ["GET"],
    handle: (c) => sendJson(c.res, 200, flowsAnswer(c.runtime)),
  },
  ...ACTIONS.map((action): Route => ({
    path: `/api/executions/:id/${action}`,
    methods: ["POST"],
    write: true,
    handle: async (c) => {
      const body = await readJsonBody(c.req);
      sendJson(c.res, 200, await runAction(c.runtime, action, c.id, body));
    },
  })),
  ...MAKERS.map((make): Route => ({
    path: `/api/executions/:id/${make.name}`,
    methods: ["POST"],
    write: true,
    handle: async (c) => {
      const body = await readJsonBody(c.req);
      sendJson(c.res, 200, await make.run(c.runtime, c.id, body));
    },
  })),
];

/** P2: the routes a server serves. */
export function routesFor(readOnly: boolean): readonly Route[] {
  return readOnly ? UI_ROUTES.filter((r) => r.write !== true) : UI_ROUTES;
}

/** P1: the route of `pathname` and its decoded id, or a 404 / 405 refusal. */
export function route(
  routes: readonly Route[],
  method: string,
  pathname: string,
): { route: Route; id: string } {
  const parts = pathname.split("/");
  for (const r of routes) {
    const pattern = r.path.split("/");
    if (pattern.length !== parts.length) continue;
    if (!pattern.every((p, i) => p === ":id" || p === parts[i])) continue;
    const at = pattern.indexOf(":id");
    const raw = at < 0 ? "" : (parts[at] ?? "");
    if (at >= 0 && raw === "") continue;
    if (!r.methods.includes(method)) {
      throw new HttpRefusal(405, "LOOM_METHOD_NOT_ALLOWED", `${method} is not allowed here`);
    }
    return { route: r, id: at < 0 ? "" : segment(raw) };
  }
  throw new HttpRefusal(404, "LOOM_NOT_FOUND", `no endpoint at ${pathname}`);
}

/** auth.ts A3: the token came in the URL; keep it in a cookie and leave the address bar clean. */
function signIn(c: RouteContext): void {
  c.res.writeHead(303, {
    ...SECURITY_HEADERS,
    ...(c.signInCookie === undefined ? {} : { "Set-Cookie": c.signInCookie }),
    Location: "/",
    "Cache-Control": "no-store",
    "Content-Length": 0,
  });
  c.res.end();
}

function live(c: RouteContext): Promise<void> {
  const from = c.url.searchParams.get("from");
  const fromSeq = from === null ? undefined : /^\d{1,15}$/.test(from) ? Number(from) : -1;
  if (fromSeq !== undefined && fromSeq < 0) {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "from must be a sequence number >= 0");
  }
  return c.live.serve(c.runtime, c.id, fromSeq, c.req, c.res, c.readOnly);
}

function segment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "the execution id is not valid URL encoding");
  }
}
