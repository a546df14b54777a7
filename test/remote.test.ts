/**
 * ADR 0020 K8.5: cancellation across the HTTP worker seam. Workers run in other OS processes
 * (`loom serve`, or the fixture worker) on one SQLite file with the test's orchestrator runtime;
 * the dispatcher places executions on them and forwards cancels (dispatcher.ts D1..D4).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  createRuntime,
  createWorkerServer,
  Dispatcher,
  ExecutionConflictError,
  ExecutionNotFoundError,
  flow$,
  InvalidInputError,
  LocalWorkerRuntime,
  memoryStore,
  NoWorkerAvailableError,
  RemoteWorkerRuntime,
  WorkerFailedError,
  WorkerUnreachableError,
  type Envelope,
  type ExecutionOutcome,
  type Json,
  type Runtime,
  type Store,
  type WorkerRuntime,
  type WorkerServer,
} from "../src/index.ts";
import { parseCommand } from "../src/cli/args.ts";
import { main } from "../src/cli/main.ts";
import { UsageError } from "../src/cli/cli-error.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import {
  deadUrl,
  FLOWS,
  heldStart,
  request,
  SECRET,
  spawnServe,
  spawnWorker,
  wallNow,
  type Child,
} from "./fixtures/remote/harness.ts";
import { expectReplayEquality, runtimes, until } from "./helpers.ts";
import { slow as scaled } from "./support/slowdown.ts";

const rt = runtimes();
const dirs: string[] = [];
const children: Child[] = [];
const opened: Runtime[] = [];
const servers: WorkerServer[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.stop()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
  await Promise.all(opened.splice(0).map((r) => r.close()));
});
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), "loom-remote-"));
  dirs.push(dir);
  return join(dir, "loom.db");
}

/** The orchestrator: a runtime on the workers' SQLite file that drives nothing itself. */
function orchestratorOn(db: string): Runtime {
  const r = createRuntime({ store: sqliteStore(db), background: false, ownerId: "orchestrator" });
  opened.push(r);
  return r;
}

const kinds = (log: Envelope[]) => log.map((e) => e.kind);
const terminals = (log: Envelope[]) =>
  log.filter((e) => e.kind.startsWith("EXECUTION_") && e.kind !== "EXECUTION_STARTED");

async function stepStarted(r: Runtime, id: string): Promise<void> {
  await until(async () => {
    const log = await r.readLog(id).catch(() => []);
    return kinds(log).includes("STEP_STARTED");
  }, scaled(20_000));
}

describe("cancel across the HTTP worker seam (ADR 0020 K8.5)", () => {
  it("a 10-minute step on a worker in another process is cancelled by dispatcher.cancel, not by its minute-long poll (D3)", async () => {
    const db = tempDb();
    // The worker's notice poll is a minute: only the forwarded cancel can abort the step in time.
    const worker = spawnWorker(db, 60_000);
    children.push(worker);
    const { url } = await worker.event((e) => e.event === "listening");
    const orchestrator = orchestratorOn(db);
    const remote = new RemoteWorkerRuntime({
      url: url ?? "",
      secret: SECRET,
      runtime: orchestrator,
    });
    const dispatcher = new Dispatcher({ runtime: orchestrator, workers: [remote] });

    const outcome = dispatcher.dispatch({ executionId: "sleep-1", flow: "sleeper" });
    await worker.event((e) => e.event === "started" && e.executionId === "sleep-1");
    await stepStarted(orchestrator, "sleep-1");
    expect(dispatcher.placement("sleep-1")).toBe(remote);

    const t0 = wallNow();
    expect(await dispatcher.cancel("sleep-1", "user closed the tab")).toEqual({
      cancelled: true,
      forwarded: true,
    });
    const aborted = await worker.event((e) => e.event === "aborted" && e.executionId === "sleep-1");
    const latencyMs = (aborted.at ?? Infinity) - t0;
    console.log(`cancel across the seam (forwarded): abort seen ${latencyMs.toFixed(1)} ms after`);
    // Before the worker's once-a-minute notice poll could see it: the forwarded cancel aborted
    // the step (the figure above is printed; a latency figure is a bench's job).
    expect(latencyMs).toBeLessThan(60_000);

    expect(await outcome).toMatchObject({ status: "cancelled", error: { code: "LOOM_CANCELLED" } });
    const log = await orchestrator.readLog("sleep-1");
    expect(kinds(log).slice(-3)).toEqual([
      "RESOURCE_METERED",
      "STEP_CANCELLED",
      "EXECUTION_CANCELLED",
    ]);
    expect(terminals(log)).toHaveLength(1);
    expect(log.at(-1)?.payload).toMatchObject({ reason: "user closed the tab" });
    expect((await orchestrator.getState("sleep-1")).status).toBe("cancelled");
    await expectReplayEquality(orchestrator, "sleep-1");
    // A second cancel finds it ended, and the worker's answer changes nothing in the log.
    expect(await dispatcher.cancel("sleep-1")).toEqual({ cancelled: false, forwarded: false });
    await remote.cancel("sleep-1");
    expect(await orchestrator.readLog("sleep-1")).toEqual(log);
  });

  it("settles when the forward cannot be delivered: the fact is durable, and the worker stops through its notice (D4)", async () => {
    const db = tempDb();
    const serve = spawnServe(db);
    children.push(serve);
    const url = await serve.line((l) => l.startsWith("http://"));
    const orchestrator = orchestratorOn(db);
    const remote = new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
    const nowhere = new RemoteWorkerRuntime({
      url: await deadUrl(),
      secret: SECRET,
      runtime: orchestrator,
    });
    // Dispatches reach the worker; its cancels go to an address nobody listens on.
    const split: WorkerRuntime = {
      dispatch: (r, o) => remote.dispatch(r, o),
      cancel: (id, reason) => nowhere.cancel(id, reason),
    };
    const reported: Error[] = [];
    const dispatcher = new Dispatcher({
      runtime: orchestrator,
      workers: [split],
      onForwardError: (e) => reported.push(e),
    });

    const outcome = dispatcher.dispatch({ executionId: "sleep-2", flow: "sleeper" });
    await serve.event((e) => e.event === "started" && e.executionId === "sleep-2");
    await stepStarted(orchestrator, "sleep-2");

    const t0 = wallNow();
    const result = await dispatcher.cancel("sleep-2", "operator");
    expect(result).toMatchObject({ cancelled: true, forwarded: false });
    expect(result.forwardError).toBeInstanceOf(WorkerUnreachableError);
    expect(reported).toEqual([result.forwardError]);
    // The durable fact settles it, whatever became of the message.
    expect(kinds(await orchestrator.readLog("sleep-2")).at(-1)).toBe("EXECUTION_CANCELLED");
    expect(await outcome).toMatchObject({ status: "cancelled" });
    // The worker's run stops through the notice the cancel left for the lease's holder.
    const aborted = await serve.event((e) => e.event === "aborted" && e.executionId === "sleep-2");
    console.log(
      `cancel across the seam (notice path): abort seen ${((aborted.at ?? 0) - t0).toFixed(1)} ms after`,
    );
    const log = await orchestrator.readLog("sleep-2");
    expect(terminals(log)).toHaveLength(1);
    expect(log.at(-1)?.kind).toBe("EXECUTION_CANCELLED");
    await expectReplayEquality(orchestrator, "sleep-2");
  });

  it("loom serve: prints its URL, answers /health with the secret (401 without), dispatches, stops on SIGTERM", async () => {
    const db = tempDb();
    const serve = spawnServe(db);
    children.push(serve);
    const url = await serve.line((l) => l.startsWith("http://"));
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const health = await request(url, { path: "/health" });
    expect(health).toMatchObject({ status: 200, body: { ok: true, active: 0 } });
    expect(serve.stderr).toContain(
      `worker ${String(health.body.owner)} serves doubler, secret-seen, sleeper at ${url}`,
    );
    expect(await request(url, { path: "/health", secret: null })).toMatchObject({ status: 401 });

    // A client with only the store reads the outcome from the log.
    const reader = sqliteStore(db);
    try {
      const remote = new RemoteWorkerRuntime({ url, secret: SECRET, store: reader });
      expect(
        await remote.dispatch({ executionId: "d-1", flow: "doubler", input: { n: 8 } }),
      ).toEqual({ status: "completed", output: 16 });
      // The secret was deleted from the worker's environment once read: its flows cannot see it.
      expect(await remote.dispatch({ executionId: "env-1", flow: "secret-seen" })).toEqual({
        status: "completed",
        output: false,
      });
      expect(await serve.stop()).toEqual({ code: 0, signal: null });
      expect(serve.stderr).toContain("SIGTERM received");
      expect(serve.stderr).toContain("loom: server stopped");
      await expect(remote.health()).rejects.toThrow(WorkerUnreachableError);
    } finally {
      await reader.close();
    }
  });
});

describe("the dispatcher (D1, D2)", () => {
  const doubler = flow$("doubler", async (ctx, input: { n: number }) =>
    ctx.run("double", () => input.n * 2),
  );

  /** Records which worker each dispatch reached. */
  function counting(name: string, inner: WorkerRuntime, seen: string[]): WorkerRuntime {
    return {
      dispatch: (r, o) => {
        seen.push(name);
        return inner.dispatch(r, o);
      },
    };
  }

  it("places round robin over the workers that answer, skipping one that is unreachable", async () => {
    const store = memoryStore();
    const orchestrator = rt(store, { background: false, ownerId: "orchestrator" });
    const urls: string[] = [];
    for (const owner of ["worker-a", "worker-b"]) {
      const server = createWorkerServer({
        runtime: rt(store.reopen(), { ownerId: owner }).registerFlow(doubler),
        secret: SECRET,
      });
      servers.push(server);
      urls.push(await server.listen(0));
    }
    const remote = (url: string) =>
      new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
    const seen: string[] = [];
    const dispatcher = new Dispatcher({
      runtime: orchestrator,
      workers: [
        counting("down", remote(await deadUrl()), seen),
        counting("a", remote(urls[0] ?? ""), seen),
        counting("b", remote(urls[1] ?? ""), seen),
      ],
    });
    for (let i = 0; i < 4; i++) {
      expect(
        await dispatcher.dispatch({ executionId: `rr-${i}`, flow: "doubler", input: { n: i } }),
      ).toEqual({ status: "completed", output: i * 2 });
    }
    // The unreachable worker was tried once, then skipped; the others took turns.
    expect(seen).toEqual(["down", "a", "b", "a", "b"]);
    // D2: dispatched again (its placement forgotten once it settled), it is not run again.
    expect(
      await dispatcher.dispatch({ executionId: "rr-0", flow: "doubler", input: { n: 0 } }),
    ).toEqual({ status: "completed", output: 0 });
    const steps = (await orchestrator.readLog("rr-0")).filter((e) => e.kind === "STEP_COMPLETED");
    expect(steps).toHaveLength(1);
  });

  it("sends a dispatch of an execution it has placed to the same worker, and forwards its cancel there", async () => {
    const store = memoryStore();
    const waits = flow$("waits", async (ctx) => ctx.suspend());
    const orchestrator = rt(store, { background: false, ownerId: "orchestrator" });
    const seen: string[] = [];
    const forwarded: string[] = [];
    const worker = (name: string): WorkerRuntime => {
      const local = new LocalWorkerRuntime(
        rt(store.reopen(), { ownerId: name }).registerFlow(waits),
      );
      return {
        dispatch: (r, o) => {
          seen.push(name);
          return local.dispatch(r, o);
        },
        cancel: (id, reason) => {
          forwarded.push(name);
          return local.cancel(id, reason);
        },
      };
    };
    const dispatcher = new Dispatcher({
      runtime: orchestrator,
      workers: [worker("a"), worker("b")],
    });
    const first = dispatcher.dispatch({ executionId: "p-1", flow: "waits" });
    const second = dispatcher.dispatch({ executionId: "p-1", flow: "waits" });
    await until(
      async () =>
        (await store.head("p-1")) >= 0 && (await orchestrator.getState("p-1")).status === "parked",
    );
    expect(seen).toEqual(["a", "a"]);
    expect(await dispatcher.cancel("p-1", "done with it")).toEqual({
      cancelled: true,
      forwarded: true,
    });
    expect(forwarded).toEqual(["a"]);
    expect(await Promise.all([first, second])).toEqual([
      expect.objectContaining({ status: "cancelled" }),
      expect.objectContaining({ status: "cancelled" }),
    ]);
    // Settled, it is placed nowhere: a later cancel has nothing to forward.
    expect(dispatcher.placement("p-1")).toBeUndefined();
    expect(await dispatcher.cancel("p-1")).toEqual({ cancelled: false, forwarded: false });
  });

  it("refuses with NoWorkerAvailableError when no worker takes it, and cancels what it never placed without a forward", async () => {
    const store = memoryStore();
    const orchestrator = rt(store, { background: false }).registerFlow(
      flow$("waits", async (ctx) => ctx.suspend()),
    );
    const down = new RemoteWorkerRuntime({
      url: await deadUrl(),
      secret: SECRET,
      runtime: orchestrator,
    });
    const dispatcher = new Dispatcher({ runtime: orchestrator, workers: [down] });
    await expect(dispatcher.dispatch({ executionId: "n-1", flow: "doubler" })).rejects.toThrow(
      NoWorkerAvailableError,
    );
    expect(await store.head("n-1")).toBe(-1);
    await orchestrator.start("waits", null, { id: "n-2" });
    expect(await dispatcher.cancel("n-2")).toEqual({ cancelled: true, forwarded: false });
    await expect(dispatcher.cancel("n-3")).rejects.toThrow(/no execution has the id "n-3"/);
  });
});

describe("the dispatcher's edges (D1, D5..D7)", () => {
  const doubler = flow$("doubler", async (ctx, input: { n: number }) =>
    ctx.run("double", () => input.n * 2),
  );
  const waits = flow$("waits", async (ctx) => ctx.suspend());

  /** Resolves when `runtime.cancel` first finds no execution (the start is not durable yet). */
  function firstNotFound(runtime: Runtime): Promise<void> {
    const cancel = runtime.cancel.bind(runtime);
    return new Promise<void>((resolve) => {
      runtime.cancel = async (...args) => {
        try {
          return await cancel(...args);
        } catch (e) {
          if (e instanceof ExecutionNotFoundError) resolve();
          throw e;
        }
      };
    });
  }

  /** A worker server on `store` (sharing `base`'s memory), and an orchestrator on `base`. */
  async function workerOn(base: ReturnType<typeof memoryStore>, store: Store = base.reopen()) {
    const server = createWorkerServer({
      runtime: rt(store, { ownerId: "worker" }).registerFlow(doubler).registerFlow(waits),
      secret: SECRET,
    });
    servers.push(server);
    return server.listen(0);
  }

  it("settles from the log a start the worker made durable but did not answer in time (D6)", async () => {
    const base = memoryStore();
    const held = heldStart(base.reopen(), "after");
    const url = await workerOn(base, held.store);
    const orchestrator = rt(base, { background: false, ownerId: "orchestrator" });
    const slow = new RemoteWorkerRuntime({
      url,
      secret: SECRET,
      runtime: orchestrator,
      timeoutMs: 200,
    });
    // The worker's store commits the start, then keeps its writer waiting past the client's
    // timeout; it lets go once the client has given up.
    const worker: WorkerRuntime = {
      dispatch: (r, o) =>
        slow.dispatch(r, o).catch((e: unknown) => {
          held.release();
          throw e;
        }),
    };
    const dispatcher = new Dispatcher({ runtime: orchestrator, workers: [worker] });
    expect(
      await dispatcher.dispatch({ executionId: "slow-1", flow: "doubler", input: { n: 3 } }),
    ).toEqual({ status: "completed", output: 6 });
    // It took the start: it is not skipped, and the flow ran once.
    expect(dispatcher.skipped()).toEqual([]);
    const steps = (await orchestrator.readLog("slow-1")).filter((e) => e.kind === "STEP_COMPLETED");
    expect(steps).toHaveLength(1);

    // Undelivered, but the log has the same start: settled from it. Another start: a conflict.
    const down = new RemoteWorkerRuntime({
      url: await deadUrl(),
      secret: SECRET,
      runtime: orchestrator,
    });
    const fallback = new Dispatcher({ runtime: orchestrator, workers: [down] });
    expect(
      await fallback.dispatch({ executionId: "slow-1", flow: "doubler", input: { n: 3 } }),
    ).toEqual({ status: "completed", output: 6 });
    expect(fallback.skipped()).toEqual([]);
    await expect(
      fallback.dispatch({ executionId: "slow-1", flow: "doubler", input: { n: 4 } }),
    ).rejects.toThrow(ExecutionConflictError);
    await expect(fallback.dispatch({ executionId: "none-1", flow: "doubler" })).rejects.toThrow(
      NoWorkerAvailableError,
    );
    expect(fallback.skipped()).toEqual([down]);
  });

  for (const signals of [true, false]) {
    it(`applies a cancel sent while the dispatch is in flight once its start is durable (D5, ${signals ? "onAccepted" : "the log"})`, async () => {
      const base = memoryStore();
      const held = heldStart(base.reopen(), "before");
      const url = await workerOn(base, held.store);
      const orchestrator = rt(base, { background: false, ownerId: "orchestrator" });
      const remote = new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
      // Without onAccepted the dispatcher learns of the start from the log alone.
      const worker: WorkerRuntime = signals
        ? remote
        : { dispatch: (r) => remote.dispatch(r), cancel: (id, why) => remote.cancel(id, why) };
      const dispatcher = new Dispatcher({ runtime: orchestrator, workers: [worker] });

      const refused = firstNotFound(orchestrator);
      const outcome = dispatcher.dispatch({ executionId: "early-1", flow: "waits" });
      await held.reached;
      expect(dispatcher.placement("early-1")).toBe(worker);
      const cancelling = dispatcher.cancel("early-1", "changed my mind");
      // The cancel found no execution: from here on it is the dispatcher's to keep (D5).
      await refused;
      const t0 = performance.now();
      held.release();
      expect(await cancelling).toEqual({ cancelled: true, forwarded: true });
      console.log(
        `cancel sent before the start was durable (${signals ? "onAccepted" : "log poll"}): applied ${(performance.now() - t0).toFixed(1)} ms after the start`,
      );
      expect(await outcome).toMatchObject({ status: "cancelled" });
      const log = await orchestrator.readLog("early-1");
      expect(terminals(log)).toHaveLength(1);
      expect(log.at(-1)).toMatchObject({
        kind: "EXECUTION_CANCELLED",
        payload: { reason: "changed my mind" },
      });
      await expectReplayEquality(orchestrator, "early-1");
    });
  }

  it("fails a waiting cancel when the dispatch ends without a start, and keeps a worker that answered 500 (D1, D5)", async () => {
    const base = memoryStore();
    const held = heldStart(base.reopen(), "before");
    const failing = await workerOn(base, held.store);
    const orchestrator = rt(base, { background: false, ownerId: "orchestrator" });
    const seen: string[] = [];
    const remote = (url: string, name: string): WorkerRuntime => {
      const inner = new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
      return {
        dispatch: (r, o) => {
          seen.push(name);
          return inner.dispatch(r, o);
        },
      };
    };
    const first = remote(failing, "failing");
    const dispatcher = new Dispatcher({
      runtime: orchestrator,
      workers: [first, remote(await workerOn(base), "other")],
    });
    const refused = firstNotFound(orchestrator);
    const outcome = dispatcher.dispatch({ executionId: "lost-1", flow: "waits" });
    await held.reached;
    const cancelling = dispatcher.cancel("lost-1");
    await refused;
    held.release(false);
    // The worker's store failed the start: its 500 is the request's error, not the worker's.
    await expect(outcome).rejects.toThrow(WorkerFailedError);
    await expect(cancelling).rejects.toThrow(ExecutionNotFoundError);
    expect(seen).toEqual(["failing"]);
    expect(dispatcher.skipped()).toEqual([]);
    // An input nested too deep never reaches a worker.
    let deep: Json = 1;
    for (let i = 0; i < 2_000; i++) deep = [deep];
    await expect(
      dispatcher.dispatch({ executionId: "deep-1", flow: "waits", input: deep }),
    ).rejects.toThrow(InvalidInputError);
    expect(seen).toEqual(["failing"]);
  });

  it("takes a skipped worker back as soon as it accepts a start, before the dispatch settles (D7)", async () => {
    const orchestrator = rt(memoryStore(), { background: false });
    let settleParked: (o: ExecutionOutcome) => void = () => undefined;
    const down = (id: string) => new WorkerUnreachableError(`unreachable for ${id}`);
    const a: WorkerRuntime = {
      dispatch: async (r, o) => {
        if (r.executionId === "s-1") throw down(r.executionId);
        o?.onAccepted?.();
        return new Promise<ExecutionOutcome>((resolve) => (settleParked = resolve));
      },
    };
    const b: WorkerRuntime = {
      dispatch: async (r, o) => {
        if (r.executionId === "s-2") throw down(r.executionId);
        o?.onAccepted?.();
        return { status: "completed", output: 1 };
      },
    };
    const dispatcher = new Dispatcher({ runtime: orchestrator, workers: [a, b] });
    expect(await dispatcher.dispatch({ executionId: "s-1", flow: "f" })).toMatchObject({
      status: "completed",
    });
    expect(dispatcher.skipped()).toEqual([a]);
    // b is unreachable for s-2, so the skipped a is tried, and accepts it: a is back at once.
    const parked = dispatcher.dispatch({ executionId: "s-2", flow: "f" });
    await until(() => dispatcher.skipped().includes(b));
    expect(dispatcher.skipped()).toEqual([b]);
    expect(dispatcher.placement("s-2")).toBe(a);
    settleParked({ status: "completed", output: 2 });
    expect(await parked).toEqual({ status: "completed", output: 2 });
  });
});

describe("loom serve's command line", () => {
  it("needs --port and --secret-env, and takes the secret only from the environment", async () => {
    expect(
      parseCommand(["serve", "flows.ts", "--port", "0", "--secret-env", "LOOM_SECRET"]),
    ).toEqual({
      name: "serve",
      db: "./loom.db",
      module: "flows.ts",
      port: 0,
      host: "127.0.0.1",
      secretEnv: "LOOM_SECRET",
    });
    for (const argv of [
      ["serve", "flows.ts", "--secret-env", "S"],
      ["serve", "flows.ts", "--port", "0"],
      ["serve", "flows.ts", "--port", "70000", "--secret-env", "S"],
      ["serve", "flows.ts", "--port", "-1", "--secret-env", "S"],
      ["serve", "flows.ts", "--port", "1", "--secret-env", "not a name"],
      ["serve", "--port", "1", "--secret-env", "S"],
      ["worker", "flows.ts", "--port", "1"],
    ]) {
      expect(() => parseCommand(argv), argv.join(" ")).toThrow(UsageError);
    }
    // A secret missing from the environment, or too short, is refused before anything starts.
    const errors: string[] = [];
    const io = {
      out: () => undefined,
      err: (t: string) => void errors.push(t),
      cwd: ".",
      debug: false,
    };
    const serve = (env: string) =>
      main(["serve", FLOWS, "--port", "0", "--secret-env", env, "--db", tempDb()], io);
    expect(await serve("LOOM_TEST_NO_SUCH_SECRET")).toBe(1);
    process.env.LOOM_TEST_SHORT_SECRET = "short";
    try {
      expect(await serve("LOOM_TEST_SHORT_SECRET")).toBe(1);
    } finally {
      delete process.env.LOOM_TEST_SHORT_SECRET;
    }
    expect(errors).toEqual([
      "loom: the environment variable LOOM_TEST_NO_SUCH_SECRET (--secret-env) is not set",
      "loom: the secret in LOOM_TEST_SHORT_SECRET (--secret-env) is 5 characters; it needs at least 16",
    ]);
  });
});
