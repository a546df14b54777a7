/**
 * The dashboard's JSON API and live stream over real runtimes (src/ui/): paging and filters, the
 * writes, and the refusals (CSRF, DNS rebinding, body limits). Every request carries the
 * server's token (auth.ts A1; test/security-dashboard.test.ts refuses the ones that do not).
 */
import { request } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Script } from "node:vm";
import { afterEach, describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  memoryStore,
  step$,
  type Runtime,
  type Store,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { startUiServer } from "../src/ui/server.ts";
import { MAX_STREAMS } from "../src/ui/live.ts";
import { bundleClient } from "../src/ui/bundle.ts";
import type { ListAnswer as ListPage } from "../src/ui/api-types.ts";
import type { ExecutionDetail, Projection } from "../src/ui/detail.ts";
import type { ErrorBody } from "../src/ui/http.ts";
import type { Envelope, TimelineRow } from "../src/index.ts";
import { until } from "./helpers.ts";
import { slow } from "./support/slowdown.ts";

const done = flow$("done", async (ctx) => ctx.run("one", async () => 1));
const parks = flow$("parks", async (ctx) => {
  const got = await ctx.suspend<{ go: string }>({ timeout: 3_600_000 });
  return ctx.run("after", async () => got);
});
const fails = flow$("fails", async (ctx) =>
  ctx.run("boom", async () => {
    throw new Error("boom");
  }),
);
const listens = flow$("listens", async (ctx) => ctx.receive<string>({ topic: "inbox" }));

interface Setup {
  runtime: Runtime;
  url: string;
  close(): Promise<void>;
}

const open: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close();
});

async function setup(store: Store = memoryStore()): Promise<Setup> {
  const runtime = createRuntime({ store, pollIntervalMs: 20 });
  runtime.registerFlow(done).registerFlow(parks).registerFlow(fails).registerFlow(listens);
  const ui = signedIn(await startUiServer({ runtime, port: 0 }));
  const close = async () => {
    await ui.close();
    await runtime.close();
  };
  open.push(close);
  return { runtime, url: ui.url, close };
}

/** The token of each server started here, by port: every request below carries it (A1). */
const tokens = new Map<string, string>();

function signedIn<T extends { url: string; token: string }>(ui: T): T {
  tokens.set(new URL(ui.url).port, ui.token);
  return ui;
}

/** The Authorization header of the server at `url`. */
function auth(url: string): Record<string, string> {
  return { authorization: `Bearer ${tokens.get(new URL(url).port) ?? "none"}` };
}

/** fetch, with the server's token. */
function call(url: string, init: RequestInit = {}): Promise<Response> {
  const headers = { ...auth(url), ...(init.headers as Record<string, string> | undefined) };
  return fetch(url, { ...init, headers });
}

/** What the API answers: the endpoint's data, or an error (H1). */
type Answer<T> = { status: number; body: T & { error: ErrorBody } };
type Update = Projection & { events: Envelope[]; timeline: TimelineRow[] };

async function get<T = ListPage>(url: string): Promise<Answer<T>> {
  const res = await call(url);
  return { status: res.status, body: (await res.json()) as Answer<T>["body"] };
}

async function post<T = Record<string, unknown>>(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Answer<T>> {
  const res = await call(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Answer<T>["body"] };
}

/** A raw request, for headers fetch will not set (Host) or bodies it would frame itself. */
function raw(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; chunks?: Buffer[] },
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers = { ...auth(url), ...opts.headers };
    const req = request(url, { method: opts.method ?? "GET", headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    for (const c of opts.chunks ?? []) req.write(c);
    req.end();
  });
}

async function startAll(runtime: Runtime): Promise<void> {
  await (await runtime.start(done, null, { id: "ab" })).result();
  await (await runtime.start(done, null, { id: "ab-1" })).result();
  await runtime.start(parks, null, { id: "ab-2" });
  await (await runtime.start(fails, null, { id: "abc" })).result();
  await runtime.start(parks, null, { id: "b/1" });
  await (await runtime.start(done, null, { id: "c" })).result();
  await until(async () => (await runtime.getState("b/1")).status === "parked");
  await until(async () => (await runtime.getState("ab-2")).status === "parked");
}

const ids = (body: { executions: { executionId: string }[] }) =>
  body.executions.map((x) => x.executionId);

describe("GET /api/executions (ui/list.ts)", () => {
  for (const kind of ["memory", "sqlite"] as const) {
    it(`L1: pages in id order with next cursors (${kind})`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "loom-ui-api-"));
      open.push(async () => rmSync(dir, { recursive: true, force: true }));
      const { runtime, url } = await setup(
        kind === "memory" ? memoryStore() : sqliteStore(join(dir, "ui.db")),
      );
      await startAll(runtime);
      const seen: string[] = [];
      let after: string | null = "";
      let pages = 0;
      while (after !== null) {
        const page: Answer<ListPage> = await get(
          `${url}/api/executions?limit=2&after=${encodeURIComponent(after)}`,
        );
        expect(page.status).toBe(200);
        seen.push(...ids(page.body));
        after = page.body.next;
        pages++;
      }
      expect(seen).toEqual(["ab", "ab-1", "ab-2", "abc", "b/1", "c"]);
      expect(pages).toBe(3);
      const first = await get(`${url}/api/executions`);
      expect(first.body.next).toBeNull();
      const row = first.body.executions[0];
      expect(row).toMatchObject({ executionId: "ab", flow: "done", status: "completed" });
      expect(Object.keys(row ?? {}).sort()).toEqual(
        ["createdAtMs", "executionId", "flow", "head", "status", "updatedAtMs"].sort(),
      );
    });

    it(`L2: q finds the exact id and the ids that start with it, paged (${kind})`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "loom-ui-api-"));
      open.push(async () => rmSync(dir, { recursive: true, force: true }));
      const { runtime, url } = await setup(
        kind === "memory" ? memoryStore() : sqliteStore(join(dir, "ui.db")),
      );
      await startAll(runtime);
      const q = async (text: string, extra = "") =>
        ids((await get(`${url}/api/executions?q=${encodeURIComponent(text)}${extra}`)).body);
      expect(await q("ab")).toEqual(["ab", "ab-1", "ab-2", "abc"]);
      expect(await q("ab-")).toEqual(["ab-1", "ab-2"]);
      expect(await q("abc")).toEqual(["abc"]);
      expect(await q("b/")).toEqual(["b/1"]);
      expect(await q("zz")).toEqual([]);
      expect(await q("a b")).toEqual([]);
      expect(await q("ab", "&status=completed")).toEqual(["ab", "ab-1"]);
      const page1 = await get(`${url}/api/executions?q=ab&limit=3`);
      expect(ids(page1.body)).toEqual(["ab", "ab-1", "ab-2"]);
      const page2 = await get(`${url}/api/executions?q=ab&limit=3&after=${page1.body.next}`);
      expect(ids(page2.body)).toEqual(["abc"]);
      expect(page2.body.next).toBeNull();
      // In any sort: the same matches, in that sort's order.
      expect(await q("ab", "&sort=id&order=desc")).toEqual(["abc", "ab-2", "ab-1", "ab"]);
    });
  }

  it("filters by status (any of) and flow", async () => {
    const { runtime, url } = await setup();
    await startAll(runtime);
    const list = async (query: string) => ids((await get(`${url}/api/executions?${query}`)).body);
    expect(await list("status=parked")).toEqual(["ab-2", "b/1"]);
    expect(await list("status=failed,parked")).toEqual(["ab-2", "abc", "b/1"]);
    expect(await list("flow=done")).toEqual(["ab", "ab-1", "c"]);
    expect(await list("flow=done&status=parked")).toEqual([]);
    const first = await get(`${url}/api/executions?status=completed&limit=1`);
    expect(ids(first.body)).toEqual(["ab"]);
    expect(await list(`status=completed&limit=1&after=${first.body.next}`)).toEqual(["ab-1"]);
  });

  it("L3: a malformed status or limit is a 400 naming it", async () => {
    const { url } = await setup();
    const bad = await get(`${url}/api/executions?status=running,sleeping`);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "LOOM_INVALID_INPUT" });
    expect(bad.body.error.message).toContain("sleeping");
    for (const limit of ["0", "201", "x", "1.5"]) {
      expect((await get(`${url}/api/executions?limit=${limit}`)).status).toBe(400);
    }
  });
});

/** An effect that meters what it is given, as an LLM call would. */
const paid = step$("paid", async (usd: number, ectx) => {
  ectx.meter({ costUsd: usd, tokens: { input: 3, output: 2 } });
  return usd;
});
const spends = flow$("spends", async (ctx, usd: number) =>
  usd > 0 ? ctx.execute(paid, usd) : ctx.run("free", async () => 0),
);

describe("GET /api/executions sorted and filtered (ui/list.ts L2..L4; store S24, S25)", () => {
  async function spent(store: Store): Promise<Setup> {
    const s = await setup(store);
    s.runtime.registerFlow(spends);
    const run = async (id: string, usd: number, principal?: string) =>
      (await s.runtime.start(spends, usd, { id, ...(principal ? { principal } : {}) })).result();
    await run("s-a", 0.5, "alice");
    await run("s-b", 0.25, "bob");
    await run("s-c", 0.5, "alice");
    await run("s-d", 0, "bob");
    await run("s-e", 0);
    return s;
  }

  for (const kind of ["memory", "sqlite"] as const) {
    it(`L4: rows carry principal, cost and tokens; every sort pages by its opaque cursor (${kind})`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "loom-ui-api-"));
      open.push(async () => rmSync(dir, { recursive: true, force: true }));
      const { url } = await spent(
        kind === "memory" ? memoryStore() : sqliteStore(join(dir, "ui.db")),
      );
      const page = await get(`${url}/api/executions?sort=cost&order=desc`);
      expect(page.status).toBe(200);
      // Ties of the key are broken by the id, in the same direction.
      expect(ids(page.body)).toEqual(["s-c", "s-a", "s-b", "s-e", "s-d"]);
      expect(page.body.executions[0]).toMatchObject({
        principal: "alice",
        costUsd: 0.5,
        tokens: 5,
      });
      expect(page.body.executions[3]?.costUsd).toBeUndefined();
      expect(typeof page.body.nowMs).toBe("number");
      for (const sort of ["id", "created", "updated", "cost"]) {
        for (const order of ["asc", "desc"]) {
          const all = ids((await get(`${url}/api/executions?sort=${sort}&order=${order}`)).body);
          const seen: string[] = [];
          let after = "";
          for (;;) {
            const p = await get(
              `${url}/api/executions?sort=${sort}&order=${order}&limit=2${after}`,
            );
            seen.push(...ids(p.body));
            if (p.body.next === null) break;
            expect(p.body.next).not.toContain("s-");
            after = `&after=${encodeURIComponent(p.body.next)}`;
          }
          expect(seen, `${sort} ${order}`).toEqual(all);
          expect([...seen].sort()).toEqual(["s-a", "s-b", "s-c", "s-d", "s-e"]);
        }
      }
    });
  }

  it("filters by principal, minimum cost and creation time, with q in any sort (L2)", async () => {
    const { url } = await spent(memoryStore());
    const list = async (query: string) => ids((await get(`${url}/api/executions?${query}`)).body);
    expect(await list("principal=alice")).toEqual(["s-a", "s-c"]);
    expect(await list("principal=bob&sort=cost&order=desc")).toEqual(["s-b", "s-d"]);
    expect(await list("minCostUsd=0.3")).toEqual(["s-a", "s-c"]);
    expect(await list("minCostUsd=0")).toHaveLength(5);
    expect(await list("createdToMs=1")).toEqual([]);
    expect(await list("createdFromMs=0&q=s-")).toHaveLength(5);
    expect(await list("q=s-b&sort=cost")).toEqual(["s-b"]);
  });

  it("L3: a malformed sort, order, number or cursor is a 400 naming it", async () => {
    const { url } = await spent(memoryStore());
    const byCost = await get(`${url}/api/executions?sort=cost&limit=1`);
    const cursor = encodeURIComponent(byCost.body.next ?? "");
    const bad: [string, string][] = [
      ["sort=bogus", "sort"],
      ["order=sideways", "order"],
      ["minCostUsd=-1", "minCostUsd"],
      ["minCostUsd=abc", "minCostUsd"],
      ["createdFromMs=1.5", "createdFromMs"],
      ["createdToMs=soon", "createdToMs"],
      ["after=garbage", "after"],
      ["after=s-a", "after"],
      // A cursor of another sort or order is not this one's.
      [`after=${cursor}`, "after"],
      [`sort=cost&order=desc&after=${cursor}`, "after"],
    ];
    for (const [query, name] of bad) {
      const answer = await get(`${url}/api/executions?${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.body.error.code).toBe("LOOM_INVALID_INPUT");
      expect(answer.body.error.message, query).toContain(name);
    }
    expect((await get(`${url}/api/executions?sort=cost&after=${cursor}`)).status).toBe(200);
  });
});

describe("GET /api/executions/:id (ui/detail.ts)", () => {
  it("404 for an unknown id, 400 for an invalid one", async () => {
    const { url } = await setup();
    const missing = await get(`${url}/api/executions/nope`);
    expect(missing.status).toBe(404);
    expect(Object.keys(missing.body)).toEqual(["error"]);
    expect(missing.body.error.code).toBe("LOOM_NOT_FOUND");
    expect(missing.body.error.message).toContain("nope");
    expect((await get(`${url}/api/executions/${encodeURIComponent("__loom_x")}`)).status).toBe(400);
    expect((await get(`${url}/api/executions/nope/live`)).status).toBe(404);
    expect((await get(`${url}/api/nothing`)).status).toBe(404);
  });

  it("D1, D2: state, events, timeline, bars and resources agree; an id with / is one segment", async () => {
    const { runtime, url } = await setup();
    await startAll(runtime);
    const { status, body } = await get<ExecutionDetail>(
      `${url}/api/executions/${encodeURIComponent("b/1")}`,
    );
    expect(status).toBe(200);
    const log = await runtime.readLog("b/1");
    expect(body.summary).toMatchObject({
      executionId: "b/1",
      status: "parked",
      head: log.length - 1,
    });
    expect(body.state.seq).toBe(log.length - 1);
    expect(body.events).toEqual(log);
    expect(body.timeline.map((r) => r.seq)).toEqual(log.map((e) => e.seq));
    expect(body.bars.bars).toEqual([
      expect.objectContaining({ kind: "suspend", status: "waiting", endMs: null }),
    ]);
    expect(body.resources).toEqual([{ budget: "execution", rows: [] }]);
    expect(body.chain).toBeNull();
    expect(body.children).toEqual({ executionId: "b/1", children: [] });
    expect(body.omittedEvents).toBe(0);
    expect(typeof body.nowMs).toBe("number");
  });
});

describe("POST /api/executions/:id/{cancel,resume,send} (ui/actions.ts)", () => {
  it("cancel calls runtime.cancel: true once, then false", async () => {
    const { runtime, url } = await setup();
    await runtime.start(parks, null, { id: "p" });
    await until(async () => (await runtime.getState("p")).status === "parked");
    const first = await post(`${url}/api/executions/p/cancel`, { reason: "from the page" });
    expect(first).toEqual({ status: 200, body: { cancelled: true } });
    const state = await runtime.getState("p");
    expect(state.status).toBe("cancelled");
    const log = await runtime.readLog("p");
    expect(log.at(-1)).toMatchObject({
      kind: "EXECUTION_CANCELLED",
      payload: { reason: "from the page" },
    });
    expect(await post(`${url}/api/executions/p/cancel`, {})).toEqual({
      status: 200,
      body: { cancelled: false },
    });
    const wrong = await post(`${url}/api/executions/p/cancel`, { reason: 7 });
    expect(wrong.status).toBe(400);
  });

  it("resume calls runtime.resume; a resume of an ended execution is a 409", async () => {
    const { runtime, url } = await setup();
    await runtime.start(parks, null, { id: "r" });
    await until(async () => (await runtime.getState("r")).status === "parked");
    expect(await post(`${url}/api/executions/r/resume`, { payload: { go: "now" } })).toEqual({
      status: 200,
      body: { resumed: true },
    });
    expect(await runtime.waitForCompletion("r", { timeoutMs: slow(5000) })).toMatchObject({
      status: "completed",
      output: { go: "now" },
    });
    const again = await post(`${url}/api/executions/r/resume`, { payload: 1 });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("LOOM_NOT_RESUMABLE");
    expect((await post(`${url}/api/executions/missing/resume`, {})).status).toBe(404);
  });

  it("send calls runtime.send with the topic; a send needs a message", async () => {
    const { runtime, url } = await setup();
    await runtime.start(listens, null, { id: "s" });
    await until(async () => (await runtime.getState("s")).status === "parked");
    expect((await post(`${url}/api/executions/s/send`, { topic: "inbox" })).status).toBe(400);
    const sent = await post(`${url}/api/executions/s/send`, { message: "hello", topic: "inbox" });
    expect(sent).toEqual({ status: 200, body: { chainId: "s", seq: 0 } });
    expect(await runtime.waitForCompletion("s", { timeoutMs: slow(5000) })).toMatchObject({
      status: "completed",
      output: "hello",
    });
  });

  it("S3: a POST from another origin is refused before anything happens; no CORS headers", async () => {
    const { runtime, url } = await setup();
    await runtime.start(parks, null, { id: "csrf" });
    await until(async () => (await runtime.getState("csrf")).status === "parked");
    const evil = await post(
      `${url}/api/executions/csrf/cancel`,
      {},
      { origin: "http://evil.example" },
    );
    expect(evil.status).toBe(403);
    expect(evil.body.error.code).toBe("LOOM_FORBIDDEN_ORIGIN");
    const sneaky = await post(`${url}/api/executions/csrf/cancel`, {}, { origin: "null" });
    expect(sneaky.status).toBe(403);
    expect((await runtime.getState("csrf")).status).toBe("parked");
    const res = await call(`${url}/api/executions/csrf/cancel`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: url },
      body: "{}",
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    expect((await runtime.getState("csrf")).status).toBe("cancelled");
  });

  it("S2: a request whose Host is not the server's is refused (DNS rebinding)", async () => {
    const { url } = await setup();
    const port = new URL(url).port;
    const rebound = await raw(`${url}/api/executions`, {
      headers: { host: `evil.example:${port}` },
    });
    expect(rebound.status).toBe(403);
    expect((JSON.parse(rebound.text) as { error: ErrorBody }).error.code).toBe(
      "LOOM_FORBIDDEN_HOST",
    );
    const local = await raw(`${url}/api/executions`, { headers: { host: `localhost:${port}` } });
    expect(local.status).toBe(200);
  });

  it("H2: non-JSON bodies, bodies over 1 MiB and malformed JSON are refused", async () => {
    const { runtime, url } = await setup();
    await runtime.start(parks, null, { id: "body" });
    await until(async () => (await runtime.getState("body")).status === "parked");
    const target = `${url}/api/executions/body/resume`;
    const form = await call(target, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "payload=1",
    });
    expect(form.status).toBe(415);
    const big = JSON.stringify({ payload: "x".repeat(1024 * 1024) });
    const declared = await post(target, big);
    expect(declared.status).toBe(413);
    expect(declared.body.error.code).toBe("LOOM_PAYLOAD_TOO_LARGE");
    // Chunked, no Content-Length: counted while it streams.
    const chunks = Array.from({ length: 17 }, () => Buffer.alloc(64 * 1024, "x"));
    const streamed = await raw(target, {
      method: "POST",
      headers: { "content-type": "application/json" },
      chunks,
    });
    expect(streamed.status).toBe(413);
    expect((await post(target, "{not json")).status).toBe(400);
    expect((await post(target, "[1, 2]")).status).toBe(400);
    expect((await runtime.getState("body")).status).toBe("parked");
    const wrongMethod = await call(target);
    expect(wrongMethod.status).toBe(405);
  });
});

interface Sse {
  event: string;
  data: Update;
}

/** Reads server-sent events from a stream until `stop` says enough. */
async function readEvents(res: Response, stop: (events: Sse[]) => boolean): Promise<Sse[]> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const events: Sse[] = [];
  let buffer = "";
  while (!stop(events)) {
    const { value, done: ended } = await reader.read();
    if (ended) break;
    buffer += decoder.decode(value, { stream: true });
    let at: number;
    while ((at = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event && data) events.push({ event, data: JSON.parse(data) as Update });
    }
  }
  await reader.cancel();
  return events;
}

describe("GET /api/executions/:id/live (ui/live.ts)", () => {
  it("E2, E3: sends the new events and the new status as the log grows, then ends", async () => {
    const { runtime, url } = await setup();
    await runtime.start(parks, null, { id: "l" });
    await until(async () => (await runtime.getState("l")).status === "parked");
    const head = (await runtime.readLog("l")).length - 1;
    const res = await call(`${url}/api/executions/l/live?from=${head + 1}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const reading = readEvents(res, (events) => events.some((e) => e.event === "end"));
    await runtime.resume("l", { go: "live" });
    const events = await reading;
    const updates = events.filter((e) => e.event === "update");
    const sent = updates.flatMap((u) => u.data.events);
    const log = await runtime.readLog("l");
    expect(sent).toEqual(log.slice(head + 1));
    expect(sent.map((e) => e.kind)).toContain("RESUMED");
    const last = updates.at(-1)?.data;
    expect(last?.summary.status).toBe("completed");
    expect(last?.state.seq).toBe(log.length - 1);
    expect(last?.bars.bars.map((b) => b.kind)).toEqual(["suspend", "step"]);
    expect(events.at(-1)?.event).toBe("end");
  });

  it("E3: from an earlier sequence number it sends the events the client lacks first", async () => {
    const { runtime, url } = await setup();
    await (await runtime.start(done, null, { id: "d" })).result();
    const res = await call(`${url}/api/executions/d/live?from=0`);
    const events = await readEvents(res, (es) => es.some((e) => e.event === "end"));
    expect(events.map((e) => e.event)).toEqual(["update", "end"]);
    expect(events[0]?.data.events).toEqual(await runtime.readLog("d"));
  });

  it("E4: close() ends open streams and resolves", async () => {
    const ui = await setup();
    const { runtime, url } = ui;
    await runtime.start(parks, null, { id: "e" });
    await until(async () => (await runtime.getState("e")).status === "parked");
    const res = await call(`${url}/api/executions/e/live`);
    const reading = readEvents(res, () => false);
    await new Promise((r) => setTimeout(r, 300));
    await ui.close();
    await expect(reading).resolves.toEqual([]);
  });
});

describe("after review (ui/server.ts S2, ui/live.ts E5)", () => {
  it("S2: a wildcard bind needs the names it answers to, and answers only those", async () => {
    const runtime = createRuntime({ store: memoryStore() });
    open.push(() => runtime.close());
    const refused = await startUiServer({ runtime, port: 0, host: "0.0.0.0" }).catch(
      (e: unknown) => e,
    );
    expect((refused as { code?: string }).code).toBe("LOOM_INVALID_INPUT");
    const ui = signedIn(
      await startUiServer({ runtime, port: 0, host: "0.0.0.0", allowHosts: ["box"] }),
    );
    open.push(() => ui.close());
    const port = new URL(ui.url).port;
    const named = await raw(`http://127.0.0.1:${port}/api/executions`, {
      headers: { host: `box:${port}` },
    });
    expect(named.status).toBe(200);
    const rebound = await raw(`http://127.0.0.1:${port}/api/executions`, {
      headers: { host: `evil.example:${port}` },
    });
    expect(rebound.status).toBe(403);
  });

  it("E5: an empty Last-Event-ID resumes nothing; from and limit must be plain numbers", async () => {
    const { runtime, url } = await setup();
    await (await runtime.start(done, null, { id: "d" })).result();
    const res = await call(`${url}/api/executions/d/live?from=0`, {
      headers: { "last-event-id": "" },
    });
    const events = await readEvents(res, (es) => es.some((e) => e.event === "end"));
    expect(events[0]?.data.events).toEqual(await runtime.readLog("d"));
    expect((await get(`${url}/api/executions/d/live?from=1e3`)).status).toBe(400);
    expect((await get(`${url}/api/executions?limit=0x10`)).status).toBe(400);
  });

  it("E5: at most MAX_STREAMS live streams are open at once", async () => {
    const { runtime, url } = await setup();
    await runtime.start(parks, null, { id: "p" });
    await until(async () => (await runtime.getState("p")).status === "parked");
    const streams = await Promise.all(
      Array.from({ length: MAX_STREAMS }, () => call(`${url}/api/executions/p/live`)),
    );
    expect(streams.every((r) => r.status === 200)).toBe(true);
    const over = await call(`${url}/api/executions/p/live`);
    expect(over.status).toBe(503);
    await over.body?.cancel();
    for (const r of streams) await r.body?.cancel();
  });
});

describe("the page and its assets (ui/server.ts, http.ts H3)", () => {
  it("serves the shell, the script and the styles with a strict CSP", async () => {
    const { url } = await setup();
    for (const [path, type] of [
      ["/", "text/html"],
      ["/assets/app.js", "text/javascript"],
      ["/assets/app.css", "text/css"],
    ] as const) {
      const res = await call(`${url}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain(type);
      expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    }
    // routes.ts P1: outside the table 404; a method its route does not take 405.
    expect((await call(`${url}/nothing`)).status).toBe(404);
    expect((await call(`${url}/`, { method: "POST" })).status).toBe(405);
  });

  it("bundle.ts B1, B3: the client script is bundled from the current sources of src/ui/client, once, and is valid JavaScript", async () => {
    const { url } = await setup();
    const first = await (await call(`${url}/assets/app.js`)).text();
    expect(() => new Script(first)).not.toThrow();
    // Words only the TypeScript client has, so this is the bundle of today's sources.
    expect(first).toContain("No action applies to this execution now.");
    expect(first).not.toMatch(/^\s*import\s/m);
    expect(await (await call(`${url}/assets/app.js`)).text()).toBe(first);
    const entry = join(import.meta.dirname, "..", "src", "ui", "client", "main.ts");
    expect(first).toBe((await bundleClient(entry)).js);
  });
});
