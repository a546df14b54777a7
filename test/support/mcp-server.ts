/**
 * A local MCP server for the tool-effect tests, with two tools: `echo` answers at once, `slow`
 * waits `ms` unless its request is cancelled. Run as a process it serves stdio and appends
 * "started" and "cancelled" lines to the file in LOOM_MCP_LOG; `startHttpMcp()` serves
 * Streamable HTTP in this process, records both in memory, and can be restarted or killed.
 */
import { randomUUID } from "node:crypto";
import { appendFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
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
      // A server killed by a test leaves its handler behind: it must not hold the process.
      t.unref();
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

/**
 * What `startHttpMcp` serves: `hangInitialize` holds every new session's first POST (its
 * `initialize`) open without an answer.
 */
export interface HttpMcpOptions {
  hangInitialize?: boolean;
}

/**
 * A Streamable HTTP server as the spec has it: a request naming a session it does not know is
 * answered 404. `restart()` drops every connection and session (a restarted server, on the same
 * port); `kill()` drops them and stops listening (a server that died).
 * `openPosts()` counts the POST streams the server holds open, its view of the client's streams.
 */
export async function startHttpMcp(opts: HttpMcpOptions = {}) {
  const cancelled: number[] = [];
  const started: number[] = [];
  let initializes = 0;
  let strays = 0;
  const open = new Set<ServerResponse>();
  const servers: McpServer[] = [];
  let sessions = new Map<string, StreamableHTTPServerTransport>();
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.url !== "/mcp") {
      strays++;
      return void res.writeHead(404).end();
    }
    if (req.method === "POST") {
      open.add(res);
      res.on("close", () => open.delete(res));
    }
    const id = req.headers["mcp-session-id"];
    let transport = typeof id === "string" ? sessions.get(id) : undefined;
    if (typeof id === "string" && !transport) {
      const body = {
        jsonrpc: "2.0",
        error: { code: -32001, message: "Session not found" },
        id: null,
      };
      return void res
        .writeHead(404, { "content-type": "application/json" })
        .end(JSON.stringify(body));
    }
    if (!transport) {
      initializes++;
      if (opts.hangInitialize) return;
      const mine = sessions;
      const fresh = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => void mine.set(sid, fresh),
      });
      const server = tools(
        () => started.push(performance.now()),
        () => cancelled.push(performance.now()),
      );
      servers.push(server);
      await server.connect(fresh);
      transport = fresh;
    }
    await transport.handleRequest(req, res);
  };
  const http = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
  const address = http.address();
  const port = typeof address === "object" && address ? address.port : 0;
  /** Every socket is destroyed at once, as a killed process's would be. */
  const kill = async () => {
    sessions = new Map();
    http.closeAllConnections();
    await new Promise<void>((r) => http.close(() => r()));
  };
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    cancelled,
    started,
    initializes: () => initializes,
    strays: () => strays,
    openPosts: () => open.size,
    kill,
    // The listener is kept, so no call meets a refused connection: what the client sees of a
    // restart is its connections reset and its session unknown.
    restart: () => {
      sessions = new Map();
      http.closeAllConnections();
    },
    close: async () => {
      if (http.listening) await kill();
      for (const s of servers) await s.close();
      for (const res of open) res.destroy();
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
