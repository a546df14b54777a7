/**
 * The HTTP worker server and its client, in one process over a memory store: authentication
 * (signing.ts A1..A2, worker-server.ts H1), bodies (H2, H4), errors as data (H3), the client's
 * typed failures, and settlement from the log (worker-runtime.ts S1, S2).
 */
import { connect, createServer as createTcpServer, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  createWorkerServer,
  ExecutionConflictError,
  flow$,
  InvalidInputError,
  LocalWorkerRuntime,
  MAX_BODY_BYTES,
  memoryStore,
  RemoteWorkerRuntime,
  UnknownFlowError,
  WorkerRefusedError,
  WorkerUnreachableError,
  type WorkerServer,
} from "../src/index.ts";
import { deadUrl, request, SECRET } from "./fixtures/remote/harness.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const servers: WorkerServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
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
async function serving() {
  const store = memoryStore();
  const worker = rt(store, { ownerId: "worker-a" }).registerFlow(doubler).registerFlow(waits);
  const orchestrator = rt(store.reopen(), { ownerId: "orchestrator", background: false });
  const server = createWorkerServer({ runtime: worker, secret: SECRET });
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
    for (const options of forged) {
      const answer = await request(url, options);
      expect(answer.status, JSON.stringify(options)).toBe(401);
      expect(answer.body.error?.code).toBe("LOOM_UNAUTHENTICATED");
    }
    // A malformed signature header and a malformed timestamp are refused the same way.
    for (const headers of [
      { "x-loom-timestamp": String(now), "x-loom-signature": "zz" },
      { "x-loom-timestamp": "soon", "x-loom-signature": "0".repeat(64) },
    ]) {
      const res = await fetch(new URL("/health", url), { headers });
      expect(res.status).toBe(401);
    }

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
