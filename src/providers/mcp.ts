/**
 * `createToolEffect({ tool, transport })`: an MCP tool call (`@modelcontextprotocol/sdk` 1.x
 * client) as a Loom effect, over stdio (a server process this effect starts) or Streamable HTTP.
 *
 * - M1 The step's signal and the effect's `timeoutMs` bound the whole call: connecting and
 *   initializing (mcp-connection.ts C1) as well as `tools/call`. Aborting a sent call sends
 *   `notifications/cancelled`, so the server's handler sees its own signal abort, and closes the
 *   call's stream (C2). A cancel rethrows the signal's reason; a deadline is `ToolTimeoutError`.
 * - M2 One connection per effect, made on first use and kept; a lost one (a server that died or
 *   restarted, an expired session's 404) is made again once per call, and the call is asked again
 *   only where it never reached the server (the 404) or the effect is `idempotent`. Otherwise a
 *   call whose connection broke fails at once (C3) with ToolConnectionLostError.
 * - M3 The HTTP status the SDK keeps in `.code` is also the error's `status`, so the retry policy
 *   classifies a 4xx as it does any provider's.
 * - `close()` ends the connection (and a stdio server process).
 * - The SDK is an optional peer, loaded on first use: importing this module loads none of it,
 *   and creating the effect without it installed throws MissingDependencyError naming it.
 */
import { InvalidInputError, defineError, registerErrorClass } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { checkedTaintSource } from "../kernel/taint.ts";
import type { Effect } from "../effects/effect.ts";
import { assertPeer, importPeer } from "../peers.ts";
import { type CallScope, inScope, McpConnection, scopedFetch } from "./mcp-connection.ts";

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
/**
 * The connection broke after the server took the call (a server that died mid-call): the tool
 * may have run, so the default retry policy does not run it again (a Loom refusal); mark the
 * effect `idempotent` to have it asked again.
 */
export class ToolConnectionLostError extends defineError("LOOM_TOOL_CONNECTION_LOST") {}
registerErrorClass(ToolConnectionLostError.code, ToolConnectionLostError);

/** A call that failed because its connection was lost; `reached`: the server may have run it. */
class Lost extends Error {
  constructor(
    readonly error: unknown,
    readonly reached: boolean,
  ) {
    super("lost connection");
  }
}

/** A client and its transport; `mcp-connection.ts` connects them. */
async function makeClient(t: ToolTransport) {
  const sdk = await loadMcp();
  const client = new sdk.client.Client({ name: "loom", version: "1" });
  const transport =
    "stdio" in t
      ? new sdk.stdio.StdioClientTransport({
          command: t.stdio.command,
          args: t.stdio.args ?? [],
          ...(t.stdio.env ? { env: t.stdio.env } : {}),
          stderr: "inherit",
        })
      : new sdk.http.StreamableHTTPClientTransport(new URL(t.http.url), { fetch: scopedFetch });
  return { client, transport };
}

/**
 * An HTTP status the SDK keeps in `.code` (its StreamableHTTPError) is put where Loom's retry
 * policy reads it (`status`), so a 4xx is not retried (M3).
 */
function withStatus(e: unknown, sdk: McpSdk): unknown {
  if (e instanceof sdk.http.StreamableHTTPError && typeof e.code === "number") {
    if (e.code >= 100 && e.code <= 599) Object.assign(e, { status: e.code });
  }
  return e;
}

function reasonOf(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error ? r : new Error(`aborted: ${String(r)}`);
}

/** One attempt at a call: connect (or reuse), then `tools/call`; a lost connection is `Lost`. */
function toolCaller(options: ToolEffectOptions, connection: McpConnection) {
  const tool = options.tool;
  return async (input: Record<string, unknown>, signal: AbortSignal, limitMs: number) => {
    const { client, attempt } = await connection.acquire(signal).catch(async (e: unknown) => {
      throw signal.aborted ? reasonOf(signal) : withStatus(e, await loadMcp());
    });
    const lost = new AbortController();
    const scope: CallScope = {
      controller: new AbortController(),
      done: false,
      lost: () =>
        lost.abort(new ToolConnectionLostError(`MCP tool "${tool}" lost its connection`, { tool })),
    };
    try {
      const result = await inScope(scope, () =>
        client.callTool({ name: tool, arguments: input }, undefined, {
          signal: AbortSignal.any([signal, lost.signal]),
          timeout: limitMs,
        }),
      );
      const out: ToolResult = {
        content: (result.content ?? []) as Json,
        isError: result.isError === true,
      };
      if (result.structuredContent !== undefined) {
        out.structuredContent = result.structuredContent as Json;
      }
      return out;
    } catch (e) {
      // M1: a cancel and the deadline are Loom's own signal; the SDK's -32001 says neither.
      if (signal.aborted) throw reasonOf(signal);
      const sdk = await loadMcp();
      if (lost.signal.aborted) {
        connection.drop(attempt);
        throw new Lost(lost.signal.reason, true);
      }
      if (e instanceof sdk.http.StreamableHTTPError && e.code === 404) {
        // The server does not know the session (restarted, expired): it ran nothing.
        connection.drop(attempt);
        throw new Lost(withStatus(e, sdk), false);
      }
      if (
        e instanceof sdk.types.McpError &&
        e.code === (sdk.types.ErrorCode.ConnectionClosed as number)
      ) {
        throw new Lost(e, true);
      }
      throw withStatus(e, sdk);
    } finally {
      // C2: the call's stream is closed with the call, whatever ended it.
      scope.done = true;
      scope.controller.abort();
    }
  };
}

export type ToolTransport =
  | { stdio: { command: string; args?: string[]; env?: Record<string, string> } }
  | { http: { url: string } };

export interface ToolEffectOptions {
  /** The MCP tool's name. */
  tool: string;
  transport: ToolTransport;
  /** The step's name (default: the tool's). */
  name?: string;
  /**
   * How long one call may take, connecting and initializing included (default 60 s, the SDK's).
   */
  timeoutMs?: number;
  /**
   * The tool may be run twice for one call (MCP's `idempotentHint`): a call whose connection
   * broke after the server took it is asked again once on a new connection (M2). Default false:
   * such a call fails with ToolConnectionLostError, which is not retried.
   */
  idempotent?: boolean;
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
  if (options.idempotent !== undefined && typeof options.idempotent !== "boolean") {
    throw new InvalidInputError("createToolEffect idempotent must be a boolean");
  }
  if (options.taint !== undefined) checkedTaintSource(options.taint, "createToolEffect taint");
  assertPeer(CLIENT, FEATURE, SDK);
  const connection = new McpConnection(() => makeClient(options.transport));
  const call = toolCaller(options, connection);
  return {
    name: options.name ?? options.tool,
    ...(options.taint === undefined ? {} : { taintsOutput: options.taint }),
    async run(input, ectx) {
      const limitMs = options.timeoutMs ?? 60_000;
      const deadline = new AbortController();
      const timer = setTimeout(() => {
        const message = `MCP tool "${options.tool}" did not answer within ${limitMs} ms`;
        deadline.abort(new ToolTimeoutError(message, { tool: options.tool }));
      }, limitMs);
      const signal = AbortSignal.any([ectx.signal, deadline.signal]);
      try {
        return await call(input, signal, limitMs);
      } catch (e) {
        // M2: a lost connection is made again once per call; the call is asked again only where
        // that cannot run the tool twice.
        if (!(e instanceof Lost) || (e.reached && options.idempotent !== true)) {
          throw e instanceof Lost ? e.error : e;
        }
        return await call(input, signal, limitMs).catch((again: unknown) => {
          throw again instanceof Lost ? again.error : again;
        });
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => connection.close(),
  };
}
