/**
 * A local MCP server for the tool-effect tests, with two tools: `echo` answers at once, `slow`
 * waits `ms` unless its request is cancelled. Run as a process it serves stdio and appends
 * "started" and "cancelled" lines to the file in LOOM_MCP_LOG; `startHttpMcp()` serves
 * Streamable HTTP in this process and records both in memory.
 */
import { randomUUID } from "node:crypto";
import { appendFileSync } from "node:fs";
import { createServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

function tools(onStart: () => void, onCancel: () => void): McpServer {
  const server = new McpServer({ name: "loom-test", version: "1" });
  server.registerTool("echo", { inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: "text", text: `echo: ${text}` }],
  }));
  server.registerTool("slow", { inputSchema: { ms: z.number() } }, async ({ ms }, extra) => {
    onStart();
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, ms);
      extra.signal.addEventListener("abort", () => {
        clearTimeout(t);
        onCancel();
        reject(new Error("cancelled"));
      });
    });
    return { content: [{ type: "text", text: `slept ${ms}` }] };
  });
  return server;
}

export async function startHttpMcp() {
  const cancelled: number[] = [];
  const started: number[] = [];
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer((req, res) => {
    void (async () => {
      const id = req.headers["mcp-session-id"];
      let transport = typeof id === "string" ? sessions.get(id) : undefined;
      if (!transport) {
        const fresh = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => void sessions.set(sid, fresh),
        });
        await tools(
          () => started.push(performance.now()),
          () => cancelled.push(performance.now()),
        ).connect(fresh);
        transport = fresh;
      }
      await transport.handleRequest(req, res);
    })();
  });
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
  const address = http.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    cancelled,
    started,
    close: async () => {
      for (const t of sessions.values()) await t.close();
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    },
  };
}

if (process.argv[2] === "stdio") {
  const log = process.env.LOOM_MCP_LOG;
  const write = (line: string) => log && appendFileSync(log, `${line}\n`);
  await tools(
    () => write("started"),
    () => write("cancelled"),
  ).connect(new StdioServerTransport());
}
