import { describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  FlowVersionError,
  memoryStore,
  NonDeterminismError,
  step$,
  type Flow,
  type MemoryStore,
} from "../src/index.ts";
import { runtimes, expectReplayEquality, offsetClock, statusOf, until } from "./helpers.ts";

const makeRuntime = runtimes();

function rt(
  store: MemoryStore,
  flows: Flow[],
  opts: Partial<Parameters<typeof createRuntime>[0]> = {},
) {
  const r = makeRuntime(store, opts);
  for (const f of flows) r.registerFlow(f);
  return r;
}

describe("recovery and replay", () => {
  it("a new runtime re-drives an abandoned execution; completed steps are not re-run", async () => {
    const store = memoryStore();
    const clock = offsetClock();
    const ran: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const make = (blocking: boolean) =>
      flow$("work", async (ctx) => {
        const a = await ctx.run("a", () => (ran.push("a"), 1));
        const b = await ctx.run("b", async () => {
          ran.push("b");
          if (blocking) await gate;
          return 2;
        });
        return a + b;
      });
    const first = rt(store, [make(true)], {
      clock,
      leaseTtlMs: 1000,
      background: false,
      ownerId: "A",
    });
    await first.start("work", null, { id: "w1" });
    await until(() => ran.length === 2);
    clock.advance(5000);
    const second = rt(store.reopen(), [make(false)], {
      clock,
      leaseTtlMs: 1000,
      background: false,
      ownerId: "B",
    });
    expect(await second.recoverAbandoned()).toEqual(["w1"]);
    expect(await second.waitForCompletion("w1")).toEqual({ status: "completed", output: 3 });
    expect(ran).toEqual(["a", "b", "b"]);
    release();
    await expectReplayEquality(second, "w1");
  });

  it("does not take over a live owner's lease", async () => {
    const store = memoryStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const f = flow$("slow", async (ctx) => ctx.run("wait", async () => gate.then(() => "done")));
    const a = rt(store, [f], { ownerId: "A", background: false });
    const h = await a.start(f, null, { id: "l1" });
    const b = rt(store.reopen(), [f], { ownerId: "B", background: false });
    expect(await b.recoverAbandoned()).toEqual([]);
    release();
    expect((await h.result()).output).toBe("done");
  });

  it("a resumed parked execution continues in the cached body without re-running it", async () => {
    let bodyRuns = 0;
    const f = flow$("loop", async (ctx) => {
      bodyRuns++;
      const seen: string[] = [];
      for (let i = 0; i < 3; i++) {
        const m = await ctx.suspend<string>();
        seen.push(await ctx.run("echo", () => m));
      }
      return seen;
    });
    const r = rt(memoryStore(), [f]);
    const h = await r.start(f, null, { id: "k1" });
    for (const m of ["a", "b", "c"]) {
      await until(async () => (await statusOf(r, "k1")) === "parked");
      await r.resume("k1", m);
    }
    expect((await h.result()).output).toEqual(["a", "b", "c"]);
    expect(bodyRuns).toBe(1);
  });

  it("an evicted execution is replayed from the log and stays correct", async () => {
    let bodyRuns = 0;
    const f = flow$("evict", async (ctx) => {
      bodyRuns++;
      const m = await ctx.suspend<string>();
      return ctx.run("echo", () => m);
    });
    const r = rt(memoryStore(), [f], { cache: { maxExecutions: 1 } });
    const h1 = await r.start(f, null, { id: "e1" });
    await until(async () => (await statusOf(r, "e1")) === "parked");
    const h2 = await r.start(f, null, { id: "e2" });
    await until(async () => (await statusOf(r, "e2")) === "parked");
    await r.resume("e1", "first");
    await r.resume("e2", "second");
    expect((await h1.result()).output).toBe("first");
    expect((await h2.result()).output).toBe("second");
    expect(bodyRuns).toBe(3);
    await expectReplayEquality(r, "e1");
  });

  it("a resume from another runtime without the flow is picked up by the owner's loop", async () => {
    const store = memoryStore();
    let bodyRuns = 0;
    const f = flow$("remote", async (ctx) => {
      bodyRuns++;
      return ctx.suspend<string>();
    });
    const owner = rt(store, [f]);
    const h = await owner.start(f, null, { id: "r1" });
    await until(async () => (await statusOf(owner, "r1")) === "parked");
    const cli = rt(store.reopen(), [], { background: false });
    await cli.resume("r1", "from afar");
    expect((await h.result()).output).toBe("from afar");
    expect(bodyRuns).toBe(1);
  });

  it("fires a due timer of an execution no process holds", async () => {
    const store = memoryStore();
    const f = flow$("nap", async (ctx) => {
      await ctx.sleep(50);
      return "rested";
    });
    const a = rt(store, [f], { background: false });
    await a.start(f, null, { id: "n1" });
    await until(async () => (await statusOf(a, "n1")) === "parked");
    await a.close();
    const b = rt(store.reopen(), [f]);
    expect((await b.waitForCompletion("n1")).output).toBe("rested");
    await expectReplayEquality(b, "n1");
  });

  it("stops with NonDeterminismError naming both calls when the flow was edited", async () => {
    const store = memoryStore();
    const v1 = flow$("edited", async (ctx) => {
      await ctx.run("search", () => 1);
      const m = await ctx.suspend<string>();
      return m;
    });
    const a = rt(store, [v1], { background: false });
    await a.start(v1, null, { id: "nd1" });
    await until(async () => (await statusOf(a, "nd1")) === "parked");
    await a.close();
    const v2 = flow$("edited", async (ctx) => {
      await ctx.run("fetch", () => 1);
      return ctx.suspend<string>();
    });
    const b = rt(store.reopen(), [v2], { background: false });
    await b.resume("nd1", "go");
    const error = await b.waitForCompletion("nd1").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NonDeterminismError);
    expect((error as Error).message).toContain("step:search#0");
    expect((error as Error).message).toContain("step:fetch#0");
    const kinds = (await b.readLog("nd1")).map((e) => e.kind);
    expect(kinds).toEqual(["EXECUTION_STARTED", "STEP_COMPLETED", "SUSPENDED", "RESUMED"]);
    expect(await b.recoverAbandoned()).toEqual([]);
  });

  it("D1 (issue 21): a recorded effect call asked with another input stops with NonDeterminismError naming it", async () => {
    const store = memoryStore();
    let query = "tides";
    const search = step$("search", async (q: string) => `results for ${q}`);
    const f = flow$("changed-input", async (ctx) => {
      const found = await ctx.execute(search, query);
      const m = await ctx.suspend<string>();
      return `${found} ${m}`;
    });
    const a = rt(store, [f], { background: false });
    await a.start(f, null, { id: "ci1" });
    await until(async () => (await statusOf(a, "ci1")) === "parked");
    await a.close();
    query = "storms"; // the same code, another input: the recorded output is not its answer
    const b = rt(store.reopen(), [f], { background: false });
    await b.resume("ci1", "go");
    const error = await b.waitForCompletion("ci1").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NonDeterminismError);
    expect((error as Error).message).toContain('step "search#0"');
    const kinds = (await b.readLog("ci1")).map((e) => e.kind);
    expect(kinds).toEqual([
      "EXECUTION_STARTED",
      "RESOURCE_METERED",
      "STEP_COMPLETED",
      "SUSPENDED",
      "RESUMED",
    ]);
    // With the input it recorded, the same execution completes.
    query = "tides";
    const c = rt(store.reopen(), [f], { background: false });
    await c.recoverAbandoned();
    expect((await c.waitForCompletion("ci1")).output).toBe("results for tides go");
  });

  it("refuses to recover under a new version unless it is declared compatible", async () => {
    const store = memoryStore();
    const body = async (ctx: Parameters<Parameters<typeof flow$>[1]>[0]) => ctx.suspend<string>();
    const a = rt(store, [flow$("versioned", body, { version: "1" })], { background: false });
    await a.start("versioned", null, { id: "v1" });
    await until(async () => (await statusOf(a, "v1")) === "parked");
    await a.close();
    const b = rt(store.reopen(), [flow$("versioned", body, { version: "2" })], {
      background: false,
    });
    await b.resume("v1", "hello");
    const error = await b.waitForCompletion("v1").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FlowVersionError);
    expect((error as Error).message).toMatch(/version "1".*version "2"/);
    await b.close();
    const c = rt(store.reopen(), [
      flow$("versioned", body, { version: "2", compatibleVersions: ["1"] }),
    ]);
    expect((await c.waitForCompletion("v1")).output).toBe("hello");
  });

  it("reports an execution it cannot drive once, and recovers only what recoverWhere allows", async () => {
    const store = memoryStore();
    const clock = offsetClock();
    const v1 = flow$("edited", async (ctx) => {
      await ctx.run("search", () => 1);
      return ctx.run("answer", () => new Promise<number>(() => undefined));
    });
    const a = rt(store, [v1], { clock, leaseTtlMs: 1000, background: false, ownerId: "A" });
    await a.start(v1, null, { id: "s1" });
    await a.start(v1, null, { id: "s2" });
    await until(async () => (await a.readLog("s2")).length >= 3);
    clock.advance(5000);
    const v2 = flow$("edited", async (ctx) => ctx.run("fetch", () => 1));
    const errors: Error[] = [];
    const b = rt(store.reopen(), [v2], {
      clock,
      leaseTtlMs: 1000,
      background: false,
      ownerId: "B",
      recoverWhere: (id) => id === "s1",
      onError: (e) => errors.push(e),
    });
    expect(await b.recoverAbandoned()).toEqual(["s1"]);
    await until(() => errors.length > 0);
    expect(await b.recoverAbandoned()).toEqual([]);
    expect(errors.map((e) => e.name)).toEqual(["NonDeterminismError"]);
    expect(errors[0]?.message).toContain('"s1"');
  });
});
