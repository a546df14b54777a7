/**
 * The HTTP worker server and its client, in one process over a memory store: authentication
 * (signing.ts A1..A2, worker-server.ts H1), bodies (H2, H4), errors as data (H3), the client's
 * typed failures, and settlement from the log (worker-runtime.ts S1, S2).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { connect, createServer as createTcpServer, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  createWorkerServer,
  ExecutionConflictError,
  flow$,
  InvalidInputError,
  LocalWorkerRuntime,
  MAX_BODY_BYTES,
  MAX_JSON_DEPTH,
  memoryStore,
  RemoteWorkerRuntime,
  RuntimeClosedError,
  signedHeaders,
  UnknownFlowError,
  WorkerFailedError,
  WorkerRefusedError,
  WorkerUnreachableError,
  type Json,
  type Store,
  type WorkerServer,
  type WorkerServerOptions,
} from "../src/index.ts";
import { UNAUTHENTICATED_MESSAGE } from "../src/remote/signing.ts";
import {
  answerHeaders,
  answering,
  deadUrl,
  request,
  SECRET,
  type Answer,
} from "./fixtures/remote/harness.ts";
import { offsetClock, runtimes, until } from "./helpers.ts";

const rt = runtimes();
const servers: WorkerServer[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
  await Promise.all(closers.splice(0).map((close) => close()));
});

let doubled = 0;
/** While a test holds it, a doubler's step stays running (a dispatch can arrive meanwhile). */
let gate: Promise<void> = Promise.resolve();
const doubler = flow$("doubler", async (ctx, input: { n: number }) =>
  ctx.run("double", async () => {
    doubled++;
    await gate;
    return input.n * 2;
  }),
);
const waits = flow$("waits", async (ctx) => ctx.suspend());

/** A worker runtime serving over HTTP, and an orchestrator runtime on the same store. */
async function serving(
  options: Omit<Partial<WorkerServerOptions>, "runtime"> & { wrap?: (s: Store) => Store } = {},
) {
  const { wrap = (s: Store) => s, ...serverOptions } = options;
  const store = memoryStore();
  const worker = rt(wrap(store), { ownerId: "worker-a" }).registerFlow(doubler).registerFlow(waits);
  const orchestrator = rt(store.reopen(), { ownerId: "orchestrator", background: false });
  const server = createWorkerServer({ runtime: worker, secret: SECRET, ...serverOptions });
  servers.push(server);
  const url = await server.listen(0);
  const remote = new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
  return { store, worker, orchestrator, server, url, remote };
}

const dispatchBody = (executionId: string, flow = "waits") => JSON.stringify({ executionId, flow });

describe("worker server authentication (H1, A1, A2)", () => {
  it("refuses unsigned, wrongly signed, tampered and stale requests with 401, changing nothing", async () => {
    const { store, orchestrator, url } = await serving();
    // A parked execution a forged cancel would end.
    expect(await request(url, { path: "/dispatch", body: dispatchBody("held-1") })).toMatchObject({
      status: 202,
      body: { executionId: "held-1" },
    });
    await until(async () => (await orchestrator.getState("held-1")).status === "parked");
    const heldLog = await orchestrator.readLog("held-1");

    const now = Date.now();
    const cancel = JSON.stringify({ executionId: "held-1" });
    const forged: Parameters<typeof request>[1][] = [];
    for (const [path, body] of [
      ["/dispatch", dispatchBody("new-1")],
      ["/cancel", cancel],
      ["/health", undefined],
    ] as const) {
      const method = body === undefined ? "GET" : "POST";
      const base = { path, method, ...(body === undefined ? {} : { body }) };
      forged.push(
        { ...base, secret: null },
        { ...base, secret: "another-secret-entirely-0123456" },
        { ...base, nowMs: now - 5 * 60_000 - 1000 },
        { ...base, nowMs: now + 6 * 60_000 },
        { ...base, signAs: { path: path === "/health" ? "/cancel" : "/health" } },
        { ...base, signAs: { method: method === "GET" ? "POST" : "GET" } },
      );
      if (body !== undefined) forged.push({ ...base, signAs: { body: body.replace("1", "2") } });
    }
    const messages = new Set<string | undefined>();
    for (const options of forged) {
      const answer = await request(url, options);
      expect(answer.status, JSON.stringify(options)).toBe(401);
      expect(answer.body.error?.code).toBe("LOOM_UNAUTHENTICATED");
      messages.add(answer.body.error?.message);
    }
    // A malformed signature header and a malformed timestamp are refused the same way.
    for (const headers of [
      { "x-loom-timestamp": String(now), "x-loom-signature": "zz" },
      { "x-loom-timestamp": "soon", "x-loom-signature": "0".repeat(64) },
    ]) {
      const res = await fetch(new URL("/health", url), { headers });
      expect(res.status).toBe(401);
      messages.add(((await res.json()) as Answer["body"]).error?.message);
    }
    // A1: one message for every 401, so a stale clock cannot be told from a wrong signature.
    expect([...messages]).toEqual([UNAUTHENTICATED_MESSAGE]);

    // Nothing changed: no log for the dispatch, the parked execution untouched.
    expect(await store.head("new-1")).toBe(-1);
    expect(await orchestrator.readLog("held-1")).toEqual(heldLog);
    expect((await orchestrator.getState("held-1")).status).toBe("parked");
    // The control: the same requests, signed, are taken.
    expect(await request(url, { path: "/health" })).toMatchObject({
      status: 200,
      body: { ok: true, owner: "worker-a", active: 1 },
    });
    expect(await request(url, { path: "/cancel", body: cancel })).toEqual({
      status: 200,
      body: { executionId: "held-1", cancelled: true },
    });
    expect((await orchestrator.getState("held-1")).status).toBe("cancelled");
  });
});

describe("worker server bodies (H2, H3, H4)", () => {
  it("answers oversized bodies 413, malformed ones 400, unknown ends 404/405, and keeps serving", async () => {
    const { store, url } = await serving();
    const big = JSON.stringify({
      executionId: "big-1",
      flow: "waits",
      input: "x".repeat(MAX_BODY_BYTES),
    });
    expect(await request(url, { path: "/dispatch", body: big })).toMatchObject({
      status: 413,
      body: { error: { code: "LOOM_PAYLOAD_TOO_LARGE" } },
    });
    // Authentication comes first: an unsigned oversized body learns only 401.
    expect((await request(url, { path: "/dispatch", body: big, secret: null })).status).toBe(401);

    const cases: [string, string | Uint8Array, number, RegExp][] = [
      ["/dispatch", "{", 400, /not valid JSON/],
      ["/dispatch", "", 400, /not valid JSON/],
      ["/dispatch", "[1]", 400, /must be a JSON object/],
      ["/dispatch", "null", 400, /must be a JSON object/],
      ["/dispatch", JSON.stringify({ flow: "waits" }), 400, /needs "executionId"/],
      ["/dispatch", JSON.stringify({ executionId: "m-1" }), 400, /needs "flow"/],
      ["/dispatch", JSON.stringify({ executionId: "m-1", flow: 7 }), 400, /needs "flow"/],
      ["/dispatch", JSON.stringify({ executionId: 7, flow: "waits" }), 400, /must be a string/],
      ["/dispatch", JSON.stringify({ executionId: "__loom_x", flow: "waits" }), 400, /reserved/],
      [
        "/dispatch",
        JSON.stringify({ executionId: "m-1", flow: "waits", x: 1 }),
        400,
        /unknown field "x"/,
      ],
      [
        "/dispatch",
        JSON.stringify({ executionId: "m-1", flow: "nope" }),
        404,
        /no flow named "nope"/,
      ],
      ["/dispatch", new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), 400, /not valid UTF-8/],
      ["/cancel", JSON.stringify({ executionId: "m-1" }), 404, /no execution has the id "m-1"/],
      ["/cancel", JSON.stringify({ executionId: "m-1", reason: "" }), 400, /reason/],
      ["/cancel", JSON.stringify({ reason: "x" }), 400, /needs "executionId"/],
    ];
    for (const [path, body, status, message] of cases) {
      const answer = await request(url, { path, body });
      expect(answer.status, `${path} ${String(body)}`).toBe(status);
      expect(answer.body.error?.message).toMatch(message);
    }
    expect(await request(url, { path: "/nowhere" })).toMatchObject({ status: 404 });
    expect(await request(url, { path: "/dispatch" })).toMatchObject({ status: 405 });
    expect(await request(url, { path: "/health", method: "POST", body: "{}" })).toMatchObject({
      status: 405,
    });
    // A client that goes away in the middle of its body does not take the server down.
    await new Promise<void>((resolve) => {
      const { hostname, port } = new URL(url);
      const socket = connect(Number(port), hostname, () => {
        socket.write("POST /dispatch HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{");
        socket.destroy();
      });
      socket.on("close", () => resolve());
    });
    // Nor does one that is not HTTP at all.
    await new Promise<void>((resolve) => {
      const { hostname, port } = new URL(url);
      const socket = connect(Number(port), hostname, () => socket.end("NOT HTTP\r\n\r\n"));
      socket.on("close", () => resolve()).resume();
    });

    // Nothing was written, and the server still answers.
    expect(await store.list()).toEqual([]);
    expect(await request(url, { path: "/health" })).toMatchObject({ status: 200 });
  });
});

describe("RemoteWorkerRuntime (S1, S2)", () => {
  it("resolves a short flow with its completed outcome, and a second dispatch does not run it again", async () => {
    const { orchestrator, remote, url } = await serving();
    doubled = 0;
    expect(
      await remote.dispatch({ executionId: "d-1", flow: "doubler", input: { n: 21 } }),
    ).toEqual({ status: "completed", output: 42 });
    expect(
      await remote.dispatch({ executionId: "d-1", flow: "doubler", input: { n: 21 } }),
    ).toEqual({ status: "completed", output: 42 });
    // Dispatched again while its step runs: the worker attaches to it (202), runs nothing new.
    let open!: () => void;
    gate = new Promise<void>((r) => (open = r));
    const first = remote.dispatch({ executionId: "d-2", flow: "doubler", input: { n: 5 } });
    await until(() => doubled === 2);
    const again = JSON.stringify({ executionId: "d-2", flow: "doubler", input: { n: 5 } });
    expect(await request(url, { path: "/dispatch", body: again })).toEqual({
      status: 202,
      body: { executionId: "d-2" },
    });
    const second = remote.dispatch({ executionId: "d-2", flow: "doubler", input: { n: 5 } });
    open();
    expect(await Promise.all([first, second])).toEqual([
      { status: "completed", output: 10 },
      { status: "completed", output: 10 },
    ]);
    expect(doubled).toBe(2);
    for (const id of ["d-1", "d-2"]) {
      const steps = (await orchestrator.readLog(id)).filter((e) => e.kind === "STEP_COMPLETED");
      expect(steps).toHaveLength(1);
    }
    // The worker's refusals of the request arrive as the errors it raised (H3).
    await expect(
      remote.dispatch({ executionId: "d-1", flow: "doubler", input: { n: 1 } }),
    ).rejects.toThrow(ExecutionConflictError);
    await expect(remote.dispatch({ executionId: "d-3", flow: "nope" })).rejects.toThrow(
      UnknownFlowError,
    );
    // And a malformed request never leaves the client.
    await expect(
      remote.dispatch({ executionId: "d-4", flow: "doubler", input: { n: () => 1 } as never }),
    ).rejects.toThrow(InvalidInputError);
    expect(await remote.health()).toEqual({ ok: true, owner: "worker-a", active: 0 });
  });

  it("fails with typed errors, within its timeout, when the worker cannot be reached or refuses", async () => {
    const { orchestrator, url } = await serving();
    const down = new RemoteWorkerRuntime({
      url: await deadUrl(),
      secret: SECRET,
      runtime: orchestrator,
    });
    await expect(down.dispatch({ executionId: "u-1", flow: "doubler" })).rejects.toThrow(
      WorkerUnreachableError,
    );
    await expect(down.cancel("u-1")).rejects.toThrow(WorkerUnreachableError);

    // A server that takes the connection and never answers: the timeout ends the wait.
    const sockets: Socket[] = [];
    const silent = createTcpServer((s) => void sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const address = silent.address();
    const port = typeof address === "object" && address ? address.port : 0;
    try {
      const hung = new RemoteWorkerRuntime({
        url: `http://127.0.0.1:${port}`,
        secret: SECRET,
        runtime: orchestrator,
        timeoutMs: 200,
      });
      await expect(hung.health()).rejects.toThrow(/no answer within 200 ms/);
      await expect(hung.health()).rejects.toThrow(WorkerUnreachableError);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }

    const wrong = new RemoteWorkerRuntime({
      url,
      secret: "not-the-secret-the-worker-has",
      runtime: orchestrator,
    });
    const refused = await wrong
      .dispatch({ executionId: "r-1", flow: "doubler" })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(WorkerRefusedError);
    expect((refused as WorkerRefusedError).details).toMatchObject({ status: 401 });
    expect(await orchestrator.list()).toEqual([]);

    expect(() => new RemoteWorkerRuntime({ url, secret: "short", runtime: orchestrator })).toThrow(
      /at least 16 characters/,
    );
    expect(
      () => new RemoteWorkerRuntime({ url: `${url}/x`, secret: SECRET, runtime: orchestrator }),
    ).toThrow(/origin/);
    expect(() => new RemoteWorkerRuntime({ url, secret: SECRET })).toThrow(/runtime or a store/);
  });

  it("reads outcomes from a store as well as from a runtime", async () => {
    const { store, url } = await serving();
    const remote = new RemoteWorkerRuntime({ url, secret: SECRET, store: store.reopen() });
    expect(await remote.dispatch({ executionId: "s-1", flow: "doubler", input: { n: 4 } })).toEqual(
      { status: "completed", output: 8 },
    );
  });
});

describe("LocalWorkerRuntime", () => {
  it("attaches a second dispatch to the existing execution, and cancels through the runtime", async () => {
    const r = rt(memoryStore()).registerFlow(doubler).registerFlow(waits);
    const local = new LocalWorkerRuntime(r);
    doubled = 0;
    const first = local.dispatch({ executionId: "l-1", flow: "doubler", input: { n: 2 } });
    const second = local.dispatch({ executionId: "l-1", flow: "doubler", input: { n: 2 } });
    expect(await Promise.all([first, second])).toEqual([
      { status: "completed", output: 4 },
      { status: "completed", output: 4 },
    ]);
    expect(doubled).toBe(1);
    // accept: the start is durable when it resolves; outcome: what the log settles it with.
    expect(await local.accept({ executionId: "l-2", flow: "waits" })).toBe("l-2");
    const parked = local.outcome("l-2");
    await until(async () => (await r.getState("l-2")).status === "parked");
    await local.cancel("l-2", { by: "operator" });
    expect(await parked).toMatchObject({ status: "cancelled" });
    expect((await r.readLog("l-2")).at(-1)?.payload).toMatchObject({ reason: '{"by":"operator"}' });
  });

  it("reports a continued execution's chain head's outcome", async () => {
    const countdown = flow$("countdown", async (ctx, input: { n: number }) => {
      const n = await ctx.run("look", () => input.n);
      return n > 0 ? ctx.continueAsNew({ n: n - 1 }) : "lift-off";
    });
    const r = rt(memoryStore(), { features: { continueAsNew: true } }).registerFlow(countdown);
    const local = new LocalWorkerRuntime(r);
    expect(
      await local.dispatch({ executionId: "c-1", flow: "countdown", input: { n: 2 } }),
    ).toEqual({ status: "completed", output: "lift-off" });
    expect(await r.followToHead("c-1")).toBe("c-1~2");
    expect(await r.waitForCompletion("c-1")).toMatchObject({ status: "continued" });
  });
});

/** `[[...[1]...]]`, arrays nested `depth` deep. */
function nested(depth: number): Json {
  let value: Json = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** A request's head, as raw HTTP/1.1. */
function head(method: string, path: string, headers: Record<string, string | number>): string {
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
  return `${method} ${path} HTTP/1.1\r\nhost: x\r\n${lines.join("")}\r\n`;
}

/** Writes `text` on a raw connection (from the address `from`); `closed` resolves with all the server sent once it closed. */
function exchange(
  url: string,
  text: string,
  from?: string,
): { socket: Socket; closed: Promise<string> } {
  const { hostname, port } = new URL(url);
  const socket = connect({
    port: Number(port),
    host: hostname,
    ...(from === undefined ? {} : { localAddress: from }),
  });
  let received = "";
  socket.on("data", (b: Buffer) => (received += b.toString()));
  // A reset after an early answer is what some of these tests are after.
  socket.on("error", () => undefined);
  const closed = new Promise<string>((resolve) => socket.on("close", () => resolve(received)));
  socket.write(text);
  return { socket, closed };
}

const statusIn = (text: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
const errorIn = (text: string) =>
  (JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as Answer["body"]).error;

/** A fake worker server that answers every request with `answer` (closed after the test). */
async function fakeWorker(
  answer: (res: ServerResponse, req: IncomingMessage) => void,
): Promise<string> {
  const fake = await answering(answer);
  closers.push(() => fake.close());
  return fake.url;
}

describe("what an unauthenticated client can hold (B1..B3, H5)", () => {
  it("answers 401 to unsigned or stale requests, and 413 to an oversized Content-Length, before reading a byte of the body", async () => {
    const { url } = await serving();
    const audience = new URL(url).origin;
    const stale = signedHeaders(
      SECRET,
      { method: "POST", path: "/dispatch", body: "", audience },
      0,
    );
    const fresh = signedHeaders(SECRET, { method: "POST", path: "/dispatch", body: "", audience });
    // Each declares a body and sends none: only an answer given before the body ends the wait.
    for (const [headers, status] of [
      [{}, 401],
      [{ "x-loom-signature": fresh["x-loom-signature"] ?? "" }, 401],
      [stale, 401],
      [fresh, 413],
    ] as const) {
      const length = status === 413 ? MAX_BODY_BYTES + 1 : 500_000;
      const { closed } = exchange(
        url,
        head("POST", "/dispatch", { ...headers, "content-length": length }),
      );
      const text = await closed;
      expect(statusIn(text), JSON.stringify(headers)).toBe(status);
      if (status === 401) expect(errorIn(text)?.message).toBe(UNAUTHENTICATED_MESSAGE);
      else expect(errorIn(text)?.code).toBe("LOOM_PAYLOAD_TOO_LARGE");
    }
    expect(await request(url, { path: "/health" })).toMatchObject({ status: 200 });
  });

  it("holds at most maxUnverifiedBytes per address of bodies not yet checked, answering 503 past it", async () => {
    const maxBytes = 64 * 1024;
    const { url, server } = await serving({ maxBodyBytes: maxBytes, maxUnverifiedBytes: maxBytes });
    const audience = new URL(url).origin;
    // Authentic headers whose digest the body will not match: only its end tells (B5).
    const signedFor = (body: string) =>
      signedHeaders(SECRET, { method: "POST", path: "/dispatch", body, audience });
    const first = exchange(
      url,
      head("POST", "/dispatch", { ...signedFor("y".repeat(60_000)), "content-length": 60_000 }),
    );
    first.socket.write("x".repeat(50_000));
    await until(() => server.unverifiedBytes === 50_000);

    const tail = "y".repeat(20_000);
    const second = exchange(
      url,
      head("POST", "/dispatch", { ...signedFor(tail), "content-length": 20_000 }) + tail,
    );
    const refused = await second.closed;
    expect(statusIn(refused)).toBe(503);
    expect(errorIn(refused)?.code).toBe("LOOM_WORKER_REFUSED");
    // H5: another address has an allowance of its own (its body is read whole: 400, not JSON).
    const other = exchange(
      url,
      head("POST", "/dispatch", {
        ...signedFor(tail),
        "content-length": 20_000,
        connection: "close",
      }) + tail,
      "127.0.0.2",
    );
    expect(statusIn(await other.closed)).toBe(400);
    // What fits still goes through meanwhile.
    expect(await request(url, { path: "/dispatch", body: dispatchBody("fits-1") })).toEqual({
      status: 202,
      body: { executionId: "fits-1" },
    });
    expect(server.unverifiedBytes).toBe(50_000);

    first.socket.write("x".repeat(10_000));
    expect(statusIn(await first.closed)).toBe(401);
    expect(server.unverifiedBytes).toBe(0);
  });

  it("takes at most maxConnections connections per address, closing the ones past it", async () => {
    const { url, server } = await serving({ maxConnections: 2, maxTotalConnections: 3 });
    expect(server.server.maxConnections).toBe(3);
    const { hostname, port } = new URL(url);
    const held = [connect(Number(port), hostname), connect(Number(port), hostname)];
    await Promise.all(held.map((s) => new Promise((r) => s.once("connect", r))));
    const third = exchange(url, head("GET", "/health", {}));
    expect(await third.closed).toBe("");
    // Another address is still served (401: the request is not signed, but it is answered).
    const elsewhere = exchange(url, head("GET", "/health", {}), "127.0.0.2");
    expect(statusIn(await elsewhere.closed)).toBe(401);
    for (const socket of held) socket.destroy();
  });

  it("cuts a body trickled slower than requestTimeoutMs before the body could end", async () => {
    const { url } = await serving({ requestTimeoutMs: 300 });
    const headers = signedHeaders(SECRET, {
      method: "POST",
      path: "/dispatch",
      body: "x".repeat(1000),
      audience: new URL(url).origin,
    });
    const t0 = performance.now();
    const slow = exchange(url, head("POST", "/dispatch", { ...headers, "content-length": 1000 }));
    const trickle = setInterval(() => slow.socket.write("x"), 50);
    const text = await slow.closed.finally(() => clearInterval(trickle));
    const elapsedMs = performance.now() - t0;
    // Node answers 408 when it can, or just closes the connection.
    expect(text === "" || statusIn(text) === 408, text).toBe(true);
    expect(elapsedMs).toBeGreaterThanOrEqual(250);
    // Cut before the whole body (1000 bytes, one per 50 ms) could arrive.
    expect(elapsedMs).toBeLessThan(1000 * 50);
  });
});

describe("JSON nested too deep (J1, J2, S4)", () => {
  it("is refused with 400 by the server before it is parsed, and leaves the server serving", async () => {
    const { store, url } = await serving();
    // Written out, since JSON.stringify itself cannot take 100,000 levels.
    const body = (depth: number, id: string) =>
      `{"executionId":"${id}","flow":"waits","input":${"[".repeat(depth)}1${"]".repeat(depth)}}`;
    for (const depth of [MAX_JSON_DEPTH + 1, 2_000, 100_000]) {
      const answer = await request(url, { path: "/dispatch", body: body(depth, `deep-${depth}`) });
      expect(answer.status, String(depth)).toBe(400);
      expect(answer.body.error).toMatchObject({
        code: "LOOM_INVALID_INPUT",
        message: `the request body nests arrays and objects more than ${MAX_JSON_DEPTH + 1} deep`,
      });
    }
    const reason = `{"executionId":"x","reason":${"[".repeat(2_000)}"why"${"]".repeat(2_000)}}`;
    expect(await request(url, { path: "/cancel", body: reason })).toMatchObject({ status: 400 });
    expect(await store.list()).toEqual([]);
    // The limit itself is taken.
    const atLimit = body(MAX_JSON_DEPTH, "deep-ok");
    expect(await request(url, { path: "/dispatch", body: atLimit })).toMatchObject({ status: 202 });
    expect(await request(url, { path: "/health" })).toMatchObject({ status: 200 });
  });

  it("is refused with InvalidInputError by the client, however deep, before anything is sent", async () => {
    const { store, remote } = await serving();
    const cyclic: unknown[] = [];
    cyclic.push(cyclic);
    for (const input of [nested(MAX_JSON_DEPTH + 1), nested(2_000), nested(200_000), cyclic]) {
      await expect(
        remote.dispatch({ executionId: "deep-1", flow: "waits", input: input as Json }),
      ).rejects.toThrow(InvalidInputError);
    }
    await expect(
      remote.dispatch({ executionId: "deep-1", flow: "waits", input: nested(2_000) }),
    ).rejects.toThrow(
      `the input of a dispatch request nests arrays and objects more than 256 deep`,
    );
    await expect(remote.cancel("deep-1", nested(2_000))).rejects.toThrow(InvalidInputError);
    expect(await store.list()).toEqual([]);
  });
});

describe("the worker server's state (H6, E1..E3)", () => {
  it("answers 503 on every endpoint once its runtime is closed, /health included", async () => {
    const { worker, url } = await serving();
    expect(await request(url, { path: "/health" })).toMatchObject({ status: 200 });
    await worker.close();
    for (const options of [
      { path: "/health" },
      { path: "/dispatch", body: dispatchBody("late-1") },
      { path: "/cancel", body: JSON.stringify({ executionId: "late-1" }) },
    ]) {
      expect(await request(url, options), options.path).toMatchObject({
        status: 503,
        body: { error: { code: "LOOM_RUNTIME_CLOSED" } },
      });
    }
  });

  it("counts active executions when asked, with no loop per execution, and close() waits for a count", async () => {
    const { worker, orchestrator, server, url } = await serving();
    let waited = 0;
    const waitForCompletion = worker.waitForCompletion.bind(worker);
    worker.waitForCompletion = (id, options) => {
      waited++;
      return waitForCompletion(id, options);
    };
    let reads = 0;
    const readState = worker.getState.bind(worker);
    worker.getState = (id, options) => {
      reads++;
      return readState(id, options);
    };
    for (let i = 0; i < 20; i++) {
      const answer = await request(url, { path: "/dispatch", body: dispatchBody(`act-${i}`) });
      expect(answer.status).toBe(202);
    }
    await until(async () => (await orchestrator.list({ status: ["parked"] })).length === 20);
    expect(await request(url, { path: "/health" })).toMatchObject({ body: { active: 20 } });
    for (let i = 0; i < 5; i++) await orchestrator.cancel(`act-${i}`);
    reads = 0;
    expect(await request(url, { path: "/health" })).toMatchObject({ body: { active: 15 } });
    // E2: a count reads the state of each execution it tracks once, and forgets the settled.
    expect(reads).toBe(20);
    reads = 0;
    expect(await server.active()).toBe(15);
    expect(reads).toBe(15);
    // E1: nothing waited on any execution, here or in a loop of its own.
    expect(waited).toBe(0);

    // E3, H6: a count in flight (on a slow store) is waited for by close().
    let reading = 0;
    worker.getState = async (id, options) => {
      reading++;
      try {
        await new Promise((r) => setTimeout(r, 20));
        return await readState(id, options);
      } finally {
        reading--;
      }
    };
    const health = request(url, { path: "/health" }).catch((e: unknown) => e);
    await until(() => reading > 0);
    await server.close();
    expect(reading).toBe(0);
    expect(await health).toBeInstanceOf(Error);
  });
});

describe("signing with wall time (A4)", () => {
  it("signs and judges timestamps by Date.now(), whatever the runtimes' clocks say", async () => {
    const skewed = offsetClock();
    skewed.advance(60 * 60_000);
    const store = memoryStore();
    const serve = async (clock?: typeof skewed) => {
      const worker = rt(store.reopen(), clock ? { clock } : {}).registerFlow(waits);
      const server = createWorkerServer({ runtime: worker, secret: SECRET });
      servers.push(server);
      return server.listen(0);
    };
    const onSkewed = await serve(skewed);
    const onTrue = await serve();
    // A server whose runtime's clock is an hour ahead takes requests stamped with wall time...
    expect(await request(onSkewed, { path: "/health" })).toMatchObject({ status: 200 });
    const trueOrchestrator = rt(store.reopen(), { background: false });
    const toSkewed = new RemoteWorkerRuntime({
      url: onSkewed,
      secret: SECRET,
      runtime: trueOrchestrator,
    });
    expect(await toSkewed.health()).toMatchObject({ ok: true });
    // ...and a client whose runtime's clock is an hour ahead stamps its requests with wall time.
    const skewedOrchestrator = rt(store.reopen(), { background: false, clock: skewed });
    const fromSkewed = new RemoteWorkerRuntime({
      url: onTrue,
      secret: SECRET,
      runtime: skewedOrchestrator,
    });
    expect(await fromSkewed.health()).toMatchObject({ ok: true });
  });
});

describe("the client's bounds (WorkerFailedError, MAX_ANSWER_BYTES, close)", () => {
  it("takes a worker's 500 with its error for a WorkerFailedError, and anything else for a refusal", async () => {
    const orchestrator = rt(memoryStore(), { background: false });
    const remoteAt = (url: string) =>
      new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
    const crashed = await fakeWorker((res, req) => {
      const body = JSON.stringify({
        error: { name: "RangeError", code: "LOOM_APPLICATION", message: "stack overflow" },
      });
      res.writeHead(500, answerHeaders(req, 500, body)).end(body);
    });
    const failed = await remoteAt(crashed)
      .dispatch({ executionId: "f-1", flow: "waits" })
      .catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(WorkerFailedError);
    expect((failed as WorkerFailedError).details).toMatchObject({ status: 500 });
    const proxy = await fakeWorker((res) => res.writeHead(500).end("<html>bad gateway</html>"));
    await expect(remoteAt(proxy).health()).rejects.toThrow(WorkerRefusedError);
  });

  it("reads at most MAX_ANSWER_BYTES of an answer", async () => {
    const orchestrator = rt(memoryStore(), { background: false });
    const chunked = await fakeWorker((res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true, owner: "x".repeat(200_000) }));
    });
    const declared = await fakeWorker((res) =>
      res.writeHead(200, { "content-length": 10 * MAX_BODY_BYTES }).end("{}"),
    );
    for (const url of [chunked, declared]) {
      const remote = new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
      const refused = await remote.health().catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(WorkerRefusedError);
      expect((refused as Error).message).toMatch(/more than 65536 bytes/);
    }
  });

  it("close() closes the runtime it made to read from a store, and never one it was given", async () => {
    const { store, orchestrator, url } = await serving();
    const fromStore = new RemoteWorkerRuntime({ url, secret: SECRET, store: store.reopen() });
    expect(
      await fromStore.dispatch({ executionId: "cl-1", flow: "doubler", input: { n: 1 } }),
    ).toEqual({ status: "completed", output: 2 });
    const parked = fromStore.dispatch({ executionId: "cl-2", flow: "waits" });
    await until(async () => (await store.head("cl-2")) >= 0);
    await fromStore.close();
    // The dispatch still settling stops with its reader, rather than poll on.
    await expect(parked).rejects.toThrow(RuntimeClosedError);
    await expect(fromStore.health()).rejects.toThrow(RuntimeClosedError);
    // The store stays open, and a runtime given to a client is its owner's to close.
    expect(await store.head("cl-1")).toBeGreaterThan(0);
    const fromRuntime = new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
    await fromRuntime.close();
    expect((await orchestrator.getState("cl-1")).status).toBe("completed");
    await expect(orchestrator.cancel("cl-2")).resolves.toBe(true);
  });
});
