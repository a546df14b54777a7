import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { flow$, isLoomError, memoryStore } from "../src/index.ts";
import {
  createToolEffect,
  ToolTimeoutError,
  type ToolEffect,
  type ToolTransport,
} from "../src/providers/mcp.ts";
import { startHttpMcp } from "./support/mcp-server.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const SERVER = join(import.meta.dirname, "support", "mcp-server.ts");
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

interface Under {
  name: string;
  transport: ToolTransport;
  /** Calls of `slow` the server started, and cancellations it saw. */
  starts: () => number;
  cancels: () => number;
}

/** Both transports, each with a way to count what its server saw. */
async function transports(): Promise<Under[]> {
  const log = join(mkdtempSync(join(tmpdir(), "loom-mcp-")), "log");
  const http = await startHttpMcp();
  cleanup.push(() => http.close());
  return [
    {
      name: "stdio",
      transport: {
        stdio: {
          command: process.execPath,
          args: ["--import", "tsx", SERVER, "stdio"],
          env: { ...(process.env as Record<string, string>), LOOM_MCP_LOG: log },
        },
      },
      starts: () => lines(log, "started"),
      cancels: () => lines(log, "cancelled"),
    },
    {
      name: "http",
      transport: { http: { url: http.url } },
      starts: () => http.started.length,
      cancels: () => http.cancelled.length,
    },
  ];
}

function lines(file: string, what: string): number {
  if (!existsSync(file)) return 0;
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l === what).length;
}

function tool<I extends Record<string, unknown>>(options: Parameters<typeof createToolEffect>[0]) {
  const t: ToolEffect<I> = createToolEffect<I>(options);
  cleanup.push(() => t.close());
  return t;
}

describe("createToolEffect over MCP (issue 6)", () => {
  it("calls a tool over stdio and over Streamable HTTP", async () => {
    for (const { name, transport } of await transports()) {
      const echo = tool<{ text: string }>({ tool: "echo", transport });
      const f = flow$(`echo-${name}`, async (ctx) => ctx.execute(echo, { text: "tides" }));
      const r = rt(memoryStore()).registerFlow(f);
      const out = await (await r.start(f, null)).result();
      expect(out.output).toEqual({
        content: [{ type: "text", text: "echo: tides" }],
        isError: false,
      });
    }
  });

  it("a cancel during a slow tool sends notifications/cancelled, which the server sees", async () => {
    for (const { name, transport, starts, cancels } of await transports()) {
      const slow = tool<{ ms: number }>({ tool: "slow", transport });
      const f = flow$(`slow-${name}`, async (ctx) => ctx.execute(slow, { ms: 60_000 }));
      const r = rt(memoryStore()).registerFlow(f);
      const h = await r.start(f, null, { id: `slow-${name}` });
      // The call has reached the server: its handler started.
      await until(() => starts() === 1, 20_000);
      const t0 = Date.now();
      expect(await h.cancel("enough")).toBe(true);
      await until(() => cancels() === 1, 2000);
      // Before the call's own 60 s: the cancel ended it (a latency figure is a bench's job).
      expect(Date.now() - t0).toBeLessThan(60_000);
      const outcome = await h.result();
      expect(outcome.error?.code).toBe("LOOM_CANCELLED");
    }
  });

  it("a real timeout is a timeout, not a cancel", async () => {
    const [, http] = await transports();
    if (!http) throw new Error("no http transport");
    const slow = tool<{ ms: number }>({ tool: "slow", transport: http.transport, timeoutMs: 100 });
    const f = flow$("times-out", async (ctx) =>
      ctx
        .execute(slow, { ms: 5000 }, { retry: false })
        .catch((e: unknown) => [e instanceof ToolTimeoutError, isLoomError(e) ? e.code : "?"]),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out.output).toEqual([true, "LOOM_TOOL_TIMEOUT"]);
  });
});
