/**
 * The MCP tool effect over Streamable HTTP against a server that restarts, dies, hangs or answers
 * 4xx (issue 21 item 7; src/providers/mcp.ts M1-M3, mcp-connection.ts C1-C4). Waits are bounded
 * by generous limits scaled by LOOM_TEST_SLOWDOWN, never asserted as latencies.
 */
import { afterEach, describe, expect, it } from "vitest";
import { flow$, memoryStore, type Effect } from "../src/index.ts";
import { createToolEffect, type ToolEffect, type ToolResult } from "../src/providers/mcp.ts";
import { startHttpMcp, type HttpMcpOptions } from "./support/mcp-server.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const SLOWDOWN = Number(process.env.LOOM_TEST_SLOWDOWN ?? 1);
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function server(opts: HttpMcpOptions = {}) {
  const s = await startHttpMcp(opts);
  cleanup.push(() => s.close());
  return s;
}

function tool<I extends Record<string, unknown>>(options: Parameters<typeof createToolEffect>[0]) {
  const t: ToolEffect<I> = createToolEffect<I>(options);
  cleanup.push(() => t.close());
  return t;
}

/** `effect`, with a flag set when its own promise settles (not the execution's outcome). */
function watched<I>(effect: Effect<I, ToolResult>) {
  const w = { settled: false };
  const run: Effect<I, ToolResult>["run"] = (input, ectx) => {
    const p = Promise.resolve(effect.run(input, ectx));
    p.then(
      () => (w.settled = true),
      () => (w.settled = true),
    );
    return p;
  };
  return Object.assign(w, { effect: { name: effect.name, run } });
}

describe("createToolEffect over Streamable HTTP (issue 21 item 7)", () => {
  it("a call after the server restarted succeeds: the lost session is initialized again", async () => {
    const s = await server();
    const echo = tool<{ text: string }>({ tool: "echo", transport: { http: { url: s.url } } });
    // No retry: the call itself re-initializes, the step is not asked again.
    const f = flow$("echo-restart", async (ctx, text: string) =>
      ctx.execute(echo, { text }, { retry: false }),
    );
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start(f, "one")).result()).status).toBe("completed");
    s.restart();
    const out = await (await r.start(f, "two")).result();
    expect(out.output).toEqual({ content: [{ type: "text", text: "echo: two" }], isError: false });
    expect(s.initializes()).toBe(2);
  });

  it("a call whose server is killed mid-call fails at once, not after its timeoutMs", async () => {
    const s = await server();
    const slow = tool<{ ms: number }>({
      tool: "slow",
      transport: { http: { url: s.url } },
      timeoutMs: 120_000,
    });
    const w = watched(slow);
    const f = flow$("killed", async (ctx) =>
      ctx.execute(w.effect, { ms: 60_000 }, { retry: false }),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null);
    await until(() => s.started.length === 1, 20_000 * SLOWDOWN);
    await s.kill();
    // Acceptance: within 1 s; the bound is 5 s so that only a call left waiting fails it.
    await until(() => w.settled, 5000 * SLOWDOWN);
    const out = await h.result();
    expect(out.error?.code).toBe("LOOM_TOOL_CONNECTION_LOST");
  });

  it("an idempotent call whose server died mid-call is asked again on the restarted server", async () => {
    const s = await server();
    const slow = tool<{ ms: number }>({
      tool: "slow",
      transport: { http: { url: s.url } },
      idempotent: true,
    });
    const f = flow$("killed-idem", async (ctx) => ctx.execute(slow, { ms: 300 }, { retry: false }));
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null);
    await until(() => s.started.length === 1, 20_000 * SLOWDOWN);
    s.restart();
    const out = await h.result();
    expect(out.output).toEqual({ content: [{ type: "text", text: "slept 300" }], isError: false });
    expect([s.started.length, s.initializes()]).toEqual([2, 2]);
  });

  it("a call that is not idempotent is not asked again after its server restarted mid-call", async () => {
    const s = await server();
    const slow = tool<{ ms: number }>({ tool: "slow", transport: { http: { url: s.url } } });
    const f = flow$("killed-once", async (ctx) => ctx.execute(slow, { ms: 300 }, { retry: false }));
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null);
    await until(() => s.started.length === 1, 20_000 * SLOWDOWN);
    s.restart();
    expect((await h.result()).error?.code).toBe("LOOM_TOOL_CONNECTION_LOST");
    // The tool may have run: it ran once, and no new session was opened to run it again.
    expect([s.started.length, s.initializes()]).toEqual([1, 1]);
  });

  it("a cancel during a hung initialize settles the effect and closes the initialize's stream", async () => {
    const s = await server({ hangInitialize: true });
    const echo = tool<{ text: string }>({ tool: "echo", transport: { http: { url: s.url } } });
    const w = watched(echo);
    const f = flow$("hung-init", async (ctx) => ctx.execute(w.effect, { text: "x" }));
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "hung-init" });
    await until(() => s.initializes() === 1 && s.openPosts() === 1, 20_000 * SLOWDOWN);
    expect(await h.cancel("enough")).toBe(true);
    // The server never answers the initialize: the effect settles on the cancel alone
    // (acceptance: within 100 ms; the bound fails only an effect left pending).
    await until(() => w.settled, 2000 * SLOWDOWN);
    await until(() => s.openPosts() === 0, 2000 * SLOWDOWN);
    expect((await h.result()).error?.code).toBe("LOOM_CANCELLED");
  });

  it("timeoutMs bounds a hung initialize too", async () => {
    const s = await server({ hangInitialize: true });
    const echo = tool<{ text: string }>({
      tool: "echo",
      transport: { http: { url: s.url } },
      timeoutMs: 200,
    });
    const f = flow$("hung-init-timeout", async (ctx) =>
      ctx.execute(echo, { text: "x" }, { retry: false }),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out.error?.code).toBe("LOOM_TOOL_TIMEOUT");
    await until(() => s.openPosts() === 0, 2000 * SLOWDOWN);
  });

  it("no stream is left open at the server after 5 cancels", async () => {
    const s = await server();
    const slow = tool<{ ms: number }>({ tool: "slow", transport: { http: { url: s.url } } });
    const f = flow$("cancel-5", async (ctx) => ctx.execute(slow, { ms: 60_000 }));
    const r = rt(memoryStore()).registerFlow(f);
    for (let i = 1; i <= 5; i++) {
      const h = await r.start(f, null, { id: `cancel-${i}` });
      await until(() => s.started.length === i, 20_000 * SLOWDOWN);
      await h.cancel("enough");
      expect((await h.result()).error?.code).toBe("LOOM_CANCELLED");
    }
    await until(() => s.openPosts() === 0, 2000 * SLOWDOWN);
    expect(s.cancelled.length).toBe(5);
  });

  it("an HTTP 4xx is classified by its status: the default retry policy does not retry it", async () => {
    const s = await server();
    const echo = tool<{ text: string }>({
      tool: "echo",
      transport: { http: { url: `${s.url}/x` } },
    });
    const f = flow$("http-404", async (ctx) => ctx.execute(echo, { text: "x" }));
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out.error?.details).toMatchObject({ status: 404 });
    expect(s.strays()).toBe(1);
  });
});
