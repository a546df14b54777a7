/**
 * What the fake provider servers share: a JSON-bodied local HTTP server, deltas written at a set
 * rate, SSE streams, and the tool calls they answer with.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";

/** What a fake server records of each request (see fake-anthropic.ts, fake-openai.ts). */
export interface StreamRecord {
  /** Deltas written before the stream ended or the client went away. */
  deltasSent: number;
  /** Deltas the full answer has. */
  deltasTotal: number;
  /** True when the client closed the connection before the last event. */
  closedEarly: boolean;
  /** When the client closed it (performance.now() of this process), if early. */
  closedAt?: number;
}

/** A tool call a fake server answers with. */
export interface FakeToolCall {
  id: string;
  name: string;
  input: Record<string, unknown>;
}

/** A local server on 127.0.0.1 whose handler gets each request's parsed JSON body. */
export async function serveJson(
  answer: (body: unknown, req: IncomingMessage, res: ServerResponse) => Promise<void>,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    void (async () => {
      let raw = "";
      for await (const chunk of req) raw += String(chunk);
      await answer(JSON.parse(raw || "{}") as unknown, req, res);
    })();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  // A fake never keeps its process alive (an example that ends, a test runner).
  server.unref();
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `text` cut into deltas of `size` characters (at least 1). */
export function splitText(text: string, size: number): string[] {
  const step = Math.max(1, size);
  const deltas: string[] = [];
  for (let i = 0; i < text.length; i += step) deltas.push(text.slice(i, i + step));
  return deltas;
}

/**
 * Starts an SSE response, recording in `record` a client that closes it early; returns the
 * function that ends it normally.
 */
export function openStream(res: ServerResponse, record: StreamRecord): () => void {
  let finished = false;
  res.on("close", () => {
    if (finished) return;
    record.closedEarly = true;
    record.closedAt = performance.now();
  });
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  return () => {
    finished = true;
    res.end();
  };
}

/** One stream's deltas, and how to write them (see `writeDeltas`). */
export interface DeltaStream {
  record: StreamRecord;
  deltas: string[];
  /** After how many deltas the stream fails (undefined: it does not). */
  errorAfter: number | undefined;
  /** Milliseconds between deltas, read before each (a server's `set` may change it midway). */
  deltaMs: () => number | undefined;
}

/** Writes the deltas at the set rate; false when the client left or the stream failed. */
export async function writeDeltas(
  s: DeltaStream,
  write: (delta: string) => void,
  fail: () => void,
): Promise<boolean> {
  for (const delta of s.deltas) {
    if (s.record.closedEarly) return false;
    const deltaMs = s.deltaMs();
    if (deltaMs) await new Promise((r) => setTimeout(r, deltaMs));
    if (s.record.closedEarly) return false;
    if (s.errorAfter !== undefined && s.record.deltasSent >= s.errorAfter) {
      fail();
      return false;
    }
    write(delta);
    s.record.deltasSent++;
  }
  return true;
}
