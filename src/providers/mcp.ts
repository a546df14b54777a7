/**
 * `createToolEffect({ tool, transport })`: an MCP tool call (`@modelcontextprotocol/sdk` 1.x
 * client) as a Loom effect, over stdio (a server process this effect starts) or Streamable HTTP.
 *
 * - The step's signal and the effect's `timeoutMs` are passed to `callTool`. Aborting sends
 *   `notifications/cancelled`, so the server's handler sees its own signal abort.
 * - The SDK rejects an abort and a timeout with the same `McpError` code (-32001), so the two are
 *   told apart by Loom's own signal: an aborted step rethrows its signal's reason (a cancel, a
 *   step timeout); otherwise it is `ToolTimeoutError`.
 * - One connection per effect, made on first use and kept; `close()` ends it (and a stdio
 *   server process).
 * - The SDK is an optional peer, loaded on first use: importing this module loads none of it,
 *   and creating the effect without it installed throws MissingDependencyError naming it.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InvalidInputError, defineError, registerErrorClass } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { checkedTaintSource } from "../kernel/taint.ts";
import type { Effect } from "../effects/effect.ts";
import { assertPeer, importPeer } from "../peers.ts";

const SDK = "@modelcontextprotocol/sdk";
const FEATURE = "loomwork/mcp";
// The SDK's root export names a file it does not ship: a subpath is what resolves.
const CLIENT = `${SDK}/client/index.js`;

interface McpSdk {
  client: typeof import("@modelcontextprotocol/sdk/client/index.js");
  stdio: typeof import("@modelcontextprotocol/sdk/client/stdio.js");
  http: typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  types: typeof import("@modelcontextprotocol/sdk/types.js");
}

/** The four SDK modules this effect uses, each imported once per process (peers.ts P2). */
async function loadMcp(): Promise<McpSdk> {
  const [client, stdio, http, types] = await Promise.all([
    importPeer<McpSdk["client"]>(CLIENT, FEATURE, SDK),
    importPeer<McpSdk["stdio"]>(`${SDK}/client/stdio.js`, FEATURE, SDK),
    importPeer<McpSdk["http"]>(`${SDK}/client/streamableHttp.js`, FEATURE, SDK),
    importPeer<McpSdk["types"]>(`${SDK}/types.js`, FEATURE, SDK),
  ]);
  return { client, stdio, http, types };
}

/** An MCP tool call ran past the effect's `timeoutMs` (not a cancel). */
export class ToolTimeoutError extends defineError("LOOM_TOOL_TIMEOUT") {}
registerErrorClass(ToolTimeoutError.code, ToolTimeoutError);

export type ToolTransport =
  | { stdio: { command: string; args?: string[]; env?: Record<string, string> } }
  | { http: { url: string } };

export interface ToolEffectOptions {
  /** The MCP tool's name. */
  tool: string;
  transport: ToolTransport;
  /** The step's name (default: the tool's). */
  name?: string;
  /** How long one call may take (the SDK's default is 60 s). */
  timeoutMs?: number;
  /** Marks every result as tainted from this source (the effect's `taintsOutput`). */
  taint?: string;
}

export interface ToolResult {
  content: Json;
  isError: boolean;
  structuredContent?: Json;
}

export type ToolEffect<I> = Effect<I, ToolResult> & { close(): Promise<void> };

/** With `taint`, every result is a taint wrapper (`Tainted<ToolResult>`). */
export function createToolEffect<I extends Record<string, unknown>>(
  options: ToolEffectOptions & { taint: string },
): ToolEffect<I> & { readonly taintsOutput: string };
export function createToolEffect<I extends Record<string, unknown>>(
  options: ToolEffectOptions,
): ToolEffect<I>;
export function createToolEffect<I extends Record<string, unknown>>(
  options: ToolEffectOptions,
): ToolEffect<I> {
  if (typeof options.tool !== "string" || options.tool === "") {
    throw new InvalidInputError("createToolEffect needs the tool's name");
  }
  if (options.taint !== undefined) checkedTaintSource(options.taint, "createToolEffect taint");
  assertPeer(CLIENT, FEATURE, SDK);
  let connecting: Promise<Client> | undefined;
  let made: Promise<Client> | undefined;
  const connect = () =>
    (connecting ??= made =
      (async () => {
        const sdk = await loadMcp();
        const client = new sdk.client.Client({ name: "loom", version: "1" });
        const t = options.transport;
        const transport =
          "stdio" in t
            ? new sdk.stdio.StdioClientTransport({
                command: t.stdio.command,
                args: t.stdio.args ?? [],
                ...(t.stdio.env ? { env: t.stdio.env } : {}),
                stderr: "inherit",
              })
            : new sdk.http.StreamableHTTPClientTransport(new URL(t.http.url));
        // A connection that closes (a server that died, a lost HTTP session) is made again on
        // the next call, instead of failing every later call of this effect.
        client.onclose = () => {
          if (connecting === made) connecting = undefined;
        };
        await client.connect(transport);
        return client;
      })().catch((e: unknown) => {
        // A failed first connection is not kept: the retry connects again.
        if (connecting === made) connecting = undefined;
        throw e;
      }));
  return {
    name: options.name ?? options.tool,
    ...(options.taint === undefined ? {} : { taintsOutput: options.taint }),
    async run(input, ectx) {
      const client = await connect();
      try {
        const result = await client.callTool({ name: options.tool, arguments: input }, undefined, {
          signal: ectx.signal,
          ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
        });
        const out: ToolResult = {
          content: (result.content ?? []) as Json,
          isError: result.isError === true,
        };
        if (result.structuredContent !== undefined) {
          out.structuredContent = result.structuredContent as Json;
        }
        return out;
      } catch (e) {
        // -32001 is both an abort and a timeout: Loom's signal says which.
        if (ectx.signal.aborted) {
          const r: unknown = ectx.signal.reason;
          throw r instanceof Error ? r : new Error(`aborted: ${String(r)}`);
        }
        // Loaded already: the connection the call went through was made with it.
        const { McpError, ErrorCode } = (await loadMcp()).types;
        if (e instanceof McpError && e.code === (ErrorCode.RequestTimeout as number)) {
          throw new ToolTimeoutError(
            `MCP tool "${options.tool}" did not answer within ${options.timeoutMs ?? 60_000} ms`,
            { tool: options.tool },
          );
        }
        throw e;
      }
    },
    async close() {
      const client = await connecting?.catch(() => undefined);
      connecting = undefined;
      await client?.close();
    },
  };
}
