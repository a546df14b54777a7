/**
 * Regressions found by adversarial review: what breaks when one thing happens before another.
 */
import { describe, expect, it } from "vitest";
import {
  callFrame,
  flow$,
  isLoomError,
  memoryStore,
  TerminalError,
  type MemoryStore,
  type Store,
} from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";
import { slow as scaled } from "./support/slowdown.ts";

const rt = runtimes();

/** A store whose `calls` take `ms` longer, as over a network. */
function delayed(inner: MemoryStore, ms: number, calls: readonly (keyof Store)[]): Store {
  const wait = () => new Promise((r) => setTimeout(r, ms));
  const slow = <A extends unknown[], R>(name: keyof Store, fn: (...a: A) => Promise<R>) =>
    calls.includes(name) ? async (...a: A) => (await wait(), fn(...a)) : fn;
  return {
    kind: inner.kind,
    appendMany: slow("appendMany", (...a: Parameters<Store["appendMany"]>) =>
      inner.appendMany(...a),
    ),
    read: slow("read", (...a: Parameters<Store["read"]>) => inner.read(...a)),
    head: slow("head", (...a: Parameters<Store["head"]>) => inner.head(...a)),
    list: slow("list", (...a: Parameters<Store["list"]>) => inner.list(...a)),
    saveSnapshot: slow("saveSnapshot", (...a: Parameters<Store["saveSnapshot"]>) =>
      inner.saveSnapshot(...a),
    ),
    loadSnapshot: slow("loadSnapshot", (...a: Parameters<Store["loadSnapshot"]>) =>
      inner.loadSnapshot(...a),
    ),
    acquireLease: slow("acquireLease", (...a: Parameters<Store["acquireLease"]>) =>
      inner.acquireLease(...a),
    ),
    renewLease: slow("renewLease", (...a: Parameters<Store["renewLease"]>) =>
      inner.renewLease(...a),
    ),
    releaseLease: slow("releaseLease", (...a: Parameters<Store["releaseLease"]>) =>
      inner.releaseLease(...a),
    ),
    getLease: slow("getLease", (...a: Parameters<Store["getLease"]>) => inner.getLease(...a)),
    takeNotices: slow("takeNotices", (...a: Parameters<Store["takeNotices"]>) =>
      inner.takeNotices(...a),
    ),
    putSchedule: (...a: Parameters<Store["putSchedule"]>) => inner.putSchedule(...a),
    listSchedules: () => inner.listSchedules(),
    appendMessage: (...a: Parameters<Store["appendMessage"]>) => inner.appendMessage(...a),
    readMessages: (...a: Parameters<Store["readMessages"]>) => inner.readMessages(...a),
    deleteExecution: (...a: Parameters<Store["deleteExecution"]>) => inner.deleteExecution(...a),
    compact: (...a: Parameters<Store["compact"]>) => inner.compact(...a),
    putKey: (...a: Parameters<Store["putKey"]>) => inner.putKey(...a),
    getKey: (...a: Parameters<Store["getKey"]>) => inner.getKey(...a),
    listKeys: (...a: Parameters<Store["listKeys"]>) => inner.listKeys(...a),
    destroyKey: (...a: Parameters<Store["destroyKey"]>) => inner.destroyKey(...a),
    advanceSchedule: (...a: Parameters<Store["advanceSchedule"]>) => inner.advanceSchedule(...a),
    deleteSchedule: (...a: Parameters<Store["deleteSchedule"]>) => inner.deleteSchedule(...a),
    setSchedulePaused: (...a: Parameters<Store["setSchedulePaused"]>) =>
      inner.setSchedulePaused(...a),
    forksOf: (...a: Parameters<Store["forksOf"]>) => inner.forksOf(...a),
    admitQueued: (...a: Parameters<Store["admitQueued"]>) => inner.admitQueued(...a),
    queueView: (...a: Parameters<Store["queueView"]>) => inner.queueView(...a),
    queueNames: () => inner.queueNames(),
    heartbeat: (...a: Parameters<Store["heartbeat"]>) => inner.heartbeat(...a),
    members: (...a: Parameters<Store["members"]>) => inner.members(...a),
    leaveFleet: (...a: Parameters<Store["leaveFleet"]>) => inner.leaveFleet(...a),
    leasesOf: (...a: Parameters<Store["leasesOf"]>) => inner.leasesOf(...a),
    reserve: (...a: Parameters<Store["reserve"]>) => inner.reserve(...a),
    settle: (...a: Parameters<Store["settle"]>) => inner.settle(...a),
    withdraw: (...a: Parameters<Store["withdraw"]>) => inner.withdraw(...a),
    blockLimiter: (...a: Parameters<Store["blockLimiter"]>) => inner.blockLimiter(...a),
    limiterView: (...a: Parameters<Store["limiterView"]>) => inner.limiterView(...a),
    limiterNames: () => inner.limiterNames(),
    dueTimers: slow("dueTimers", (...a: Parameters<Store["dueTimers"]>) => inner.dueTimers(...a)),
    nextWakeAt: slow("nextWakeAt", (...a: Parameters<Store["nextWakeAt"]>) =>
      inner.nextWakeAt(...a),
    ),
    deferTimer: slow("deferTimer", (...a: Parameters<Store["deferTimer"]>) =>
      inner.deferTimer(...a),
    ),
    deleteTimer: slow("deleteTimer", (...a: Parameters<Store["deleteTimer"]>) =>
      inner.deleteTimer(...a),
    ),
    close: () => inner.close(),
  };
}

describe("races", () => {
  it("W2: a cached run that another runtime finished settles its waiters from the log", async () => {
    const store = memoryStore();
    const f = flow$("chat", async (ctx) => {
      const msg = await ctx.suspend<string>();
      return ctx.run("answer", () => `got ${msg}`);
    });
    const a = rt(store, { ownerId: "A" }).registerFlow(f);
    const b = rt(store, { ownerId: "B" }).registerFlow(f);
    const h = await a.start("chat", null, { id: "c1" });
    await until(async () => (await store.list())[0]?.status === "parked");
    await b.resume("c1", "hi");
    const expected = { status: "completed", output: "got hi" };
    expect(await b.waitForCompletion("c1", { timeoutMs: scaled(3000) })).toEqual(expected);
    expect(await h.result()).toEqual(expected);
    expect((await a.getState("c1")).status).toBe("completed");
  });

  it("E4: a timer that comes due after the execution ended appends nothing", async () => {
    const store = memoryStore();
    const f = flow$("p", async (ctx) => {
      await ctx.parallel([
        (c) => c.sleep(5000),
        (c) => c.run("boom", () => Promise.reject(new TerminalError("no"))),
      ]);
    });
    const a = rt(store, { ownerId: "A" }).registerFlow(f);
    rt(store, { ownerId: "B", clock: { now: () => Date.now() + 10_000 } });
    expect((await (await a.start("p", null, { id: "x1" })).result()).status).toBe("failed");
    await new Promise((r) => setTimeout(r, 150));
    const log = await store.read("x1");
    expect(log[log.length - 1]?.kind).toBe("EXECUTION_FAILED");
    expect(await store.dueTimers(Date.now() + 60_000, 10)).toEqual([]);
  });

  it("a due timer whose execution another owner drives does not stall the loop", async () => {
    const store = memoryStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const busy = flow$("busy", async (ctx) => {
      await ctx.suspend({ timeout: 50 });
      await ctx.run("long", () => gate);
    });
    const napper = flow$("napper", async (ctx) => (await ctx.sleep(100), "woke"));
    const a = rt(store, { ownerId: "A", pollIntervalMs: 60_000 }).registerFlow(busy);
    await a.start("busy", null, { id: "busy1" });
    await a.resume("busy1", "ok");
    const c = rt(store, { ownerId: "C", background: false }).registerFlow(napper);
    await c.start("napper", null, { id: "nap1" });
    await c.close();
    const b = rt(store, { ownerId: "B" }).registerFlow(napper).registerFlow(busy);
    expect((await b.waitForCompletion("nap1", { timeoutMs: scaled(10_000) })).output).toBe("woke");
    release();
  });

  it("R8: a suspend inside ctx.parallel parks, and a resume from another process reaches it", async () => {
    const store = memoryStore();
    const f = flow$("approve", async (ctx) => {
      const [a, b] = await ctx.parallel([
        (c) => c.suspend<string>(),
        async (c) => c.run("x", () => "x"),
      ]);
      return `${a}${b}`;
    });
    const a = rt(store, { ownerId: "A", leaseTtlMs: 2000 }).registerFlow(f);
    const h = await a.start("approve", null, { id: "ap1" });
    await until(async () => (await store.list())[0]?.status === "parked");
    await until(async () => (await store.getLease("ap1"))?.owner === undefined);
    await rt(store, { ownerId: "cli", background: false }).resume("ap1", "yes");
    expect((await h.result()).output).toBe("yesx");
  });

  it("a renewal that lands after a park and a new fence does not stop the run", async () => {
    const mem = memoryStore();
    const store = delayed(mem, 150, ["renewLease"]);
    const attempts: number[] = [];
    const f = flow$("chat", async (ctx) => {
      await ctx.run("work", () => new Promise((r) => setTimeout(r, 150)));
      const m = await ctx.suspend<string>();
      await ctx.run("next", ({ attempt }) => {
        attempts.push(attempt);
        return new Promise((r) => setTimeout(r, 300));
      });
      return m;
    });
    const a = rt(store, { ownerId: "A", leaseTtlMs: 300 }).registerFlow(f);
    await a.start("chat", null, { id: "c1" });
    await until(async () => (await mem.list())[0]?.status === "parked");
    await a.resume("c1", "go");
    expect((await a.waitForCompletion("c1", { timeoutMs: scaled(5000) })).output).toBe("go");
    expect(attempts).toEqual([1]);
  });

  it("R7: a second call in one scope while the first is outstanding is refused", async () => {
    const f = flow$("racy", async (ctx) => {
      const results = await Promise.allSettled([ctx.run("a", () => 1), ctx.run("b", () => 2)]);
      return results.map((r) =>
        r.status === "fulfilled" ? "ok" : isLoomError(r.reason, "LOOM_INVALID_INPUT"),
      );
    });
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start("racy", null, { id: "r7" })).result()).output).toEqual([
      "ok",
      true,
    ]);
  });

  it("R6: eviction halts a parked body without running its catch blocks", async () => {
    const effects: string[] = [];
    const f = flow$("ask", async (ctx, who: string) => {
      try {
        return await ctx.suspend<string>({ timeout: 60_000 });
      } catch {
        effects.push(`${who} gave up`);
        return "gave up";
      }
    });
    const r = rt(memoryStore(), { cache: { maxExecutions: 1 } }).registerFlow(f);
    await r.start("ask", "u1", { id: "u1" });
    await until(async () => (await r.getState("u1")).status === "parked");
    await r.start("ask", "u2", { id: "u2" });
    await until(async () => (await r.getState("u2")).status === "parked");
    await new Promise((res) => setTimeout(res, 30));
    expect(effects).toEqual([]);
    await r.resume("u1", "yes");
    expect((await r.waitForCompletion("u1", { timeoutMs: scaled(2000) })).output).toBe("yes");
  });

  it("a resume racing close() is refused and leaves the lease released", async () => {
    const store = memoryStore();
    const f = flow$("c", async (ctx) => ctx.suspend<string>());
    const a = rt(store, { ownerId: "A" }).registerFlow(f);
    await a.start("c", null, { id: "c1" });
    await until(async () => (await store.list())[0]?.status === "parked");
    const resumed = a.resume("c1", "late").catch((e: unknown) => e);
    await a.close();
    expect(isLoomError(await resumed, "LOOM_RUNTIME_CLOSED")).toBe(true);
    await new Promise((r) => setTimeout(r, 20));
    expect((await store.getLease("c1"))?.owner).toBeUndefined();
    expect((await store.read("c1")).map((e) => e.kind)).toEqual(["EXECUTION_STARTED", "SUSPENDED"]);
  });

  it("a resume of an unknown id leaves no lease row", async () => {
    const store = memoryStore();
    const e = await rt(store)
      .resume("ghost", 1)
      .catch((err: unknown) => err);
    expect(isLoomError(e, "LOOM_NOT_FOUND")).toBe(true);
    expect(await store.getLease("ghost")).toBeUndefined();
  });

  it("F5: what the body mutates (its input, a step's result) never reaches the fold or a snapshot", async () => {
    const store = memoryStore();
    const f = flow$("alias", async (ctx, input: { items: string[] }) => {
      input.items.push("mutated");
      const r = await ctx.run("a", async () => ({ n: 1 }));
      r.n = 999;
      for (let i = 0; i < 4; i++) await ctx.run("s", () => i);
      return ctx.suspend();
    });
    const r = rt(store, { snapshotEvery: 2 }).registerFlow(f);
    await r.start("alias", { items: ["x"] }, { id: "e1" });
    await until(async () => (await store.list())[0]?.status === "parked");
    const snap = await store.loadSnapshot("e1");
    expect(snap?.state.input).toEqual({ items: ["x"] });
    expect(snap && callFrame(snap.state, "a#0")?.output).toEqual({ n: 1 });
    await expect(r.start("alias", { items: ["x"] }, { id: "e1" })).resolves.toMatchObject({
      id: "e1",
    });
  });

  it("R6: a ctx call from a branch that already returned is refused, and nothing runs after the end", async () => {
    let late = 0;
    let charged = 0;
    const f = flow$("late", async (ctx) => {
      let refused: unknown;
      await ctx.parallel([
        async (c) => {
          setTimeout(() => {
            c.run("late", () => late++).catch((e: unknown) => (refused = e));
          }, 20);
          return 0;
        },
        async (c) => {
          await c.sleep(60);
          return 1;
        },
      ]);
      return isLoomError(refused, "LOOM_INVALID_INPUT");
    });
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start("late", null, { id: "b1" })).result()).output).toBe(true);
    expect(late).toBe(0);
    const g = flow$("orphan", async (ctx) => {
      await ctx.parallel([
        async () => Promise.reject(new Error("boom")),
        async (c) => {
          await new Promise((res) => setTimeout(res, 20));
          return c.run("charge", () => charged++);
        },
      ]);
    });
    r.registerFlow(g);
    expect((await (await r.start("orphan", null, { id: "o1" })).result()).status).toBe("failed");
    await new Promise((res) => setTimeout(res, 30));
    expect(charged).toBe(0);
    expect((await r.readLog("o1")).map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "DECISION_RECORDED",
      "EXECUTION_FAILED",
    ]);
  });
});
