import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { flow$, memoryStore, meteredFetch, step$, type ResourceDelta } from "../src/index.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();
let server: Server;
let base = "";

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === "/hang") return; // never answers
    let received = 0;
    req.on("data", (c: Buffer) => (received += c.length));
    req.on("end", () => {
      res.setHeader("content-type", "text/plain");
      const framing = req.headers["content-length"] === undefined ? "chunked" : "length";
      res.end(`${"x".repeat(50_000)}|${received}|${framing}`);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

describe("meteredFetch: netBytes (ADR 0032 R1)", () => {
  it("meters the request and the response of an effect's HTTP calls", async () => {
    const upload = step$("upload", async (size: number, ectx) => {
      const res = await meteredFetch(ectx)(`${base}/upload?n=${size}`, {
        method: "POST",
        body: "a".repeat(size),
      });
      return (await res.text()).split("|").slice(1).join("|");
    });
    const f = flow$("uploads", async (ctx) => ctx.execute(upload, 10_000));
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "net-1" })).result();
    // A body of known length goes out as it would without Loom: with its Content-Length.
    expect(out.output).toBe("10000|length");
    const state = await r.getState("net-1");
    const bodies = 10_000 + 50_013;
    expect(state._resources?.netBytes).toBeGreaterThan(bodies);
    // Start lines and headers, framed as HTTP/1.1, are a few hundred bytes here.
    expect(state._resources?.netBytes).toBeLessThan(bodies + 1_000);
    expect(state._resources?.memBytes).toBeUndefined();
  });

  it("counts a streamed request body and a response read in pieces", async () => {
    let net = 0;
    const fetch = meteredFetch({
      signal: new AbortController().signal,
      meter: (d: ResourceDelta) => void (net += d.netBytes ?? 0),
    });
    const chunks = [new Uint8Array(3000), new Uint8Array(4000)];
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = chunks.shift();
        if (next) controller.enqueue(next);
        else controller.close();
      },
    });
    const res = await fetch(`${base}/stream`, {
      method: "PUT",
      body: stream,
      duplex: "half",
    });
    expect(res.url).toBe(`${base}/stream`);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let read = 0;
    let text = "";
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      read += value.byteLength;
      text += decoder.decode(value, { stream: true });
    }
    expect(text.endsWith("|7000|chunked")).toBe(true);
    expect(net).toBeGreaterThan(7000 + read);
    expect(net).toBeLessThan(7000 + read + 1000);
  });

  it("meters a Request object with a body, as an SDK passes it, and sends it unchanged", async () => {
    let net = 0;
    const fetch = meteredFetch({
      signal: new AbortController().signal,
      meter: (d: ResourceDelta) => void (net += d.netBytes ?? 0),
    });
    const body = JSON.stringify({ model: "m", messages: ["a".repeat(2000)] });
    const req = new Request(`${base}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    const text = await (await fetch(req)).text();
    expect(text.endsWith(`|${body.length}|length`)).toBe(true);
    expect(net).toBeGreaterThan(body.length + text.length);
    expect(net).toBeLessThan(body.length + text.length + 1000);
  });

  it("forwards the effect's signal: an abort ends a request the server never answers", async () => {
    const controller = new AbortController();
    const fetch = meteredFetch({ signal: controller.signal, meter: () => undefined });
    const pending = fetch(`${base}/hang`).then(
      () => "answered",
      (e: unknown) => (e as Error).message,
    );
    setTimeout(() => controller.abort(new Error("step cancelled")), 50);
    expect(await pending).toBe("step cancelled");
    // The caller's own signal is honoured too.
    const own = AbortSignal.timeout(50);
    const mine = meteredFetch({ signal: new AbortController().signal, meter: () => undefined });
    await expect(mine(`${base}/hang`, { signal: own })).rejects.toThrow(/timeout|abort/i);
  });
});
