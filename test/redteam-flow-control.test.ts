/**
 * Red-team regressions for flow control (issue 26), on the memory and SQLite stores: each test
 * is an attack that once broke a promise of docs/flow-control.md, pinned with the invariant its
 * fix states: runtime/rate-limits.ts RL2, RL4, RL6, RL12, runtime/retry-hints.ts RH1 (RL5), runtime/fork.ts
 * V8, runtime/debounce.ts DB1, DB4, DB5, runtime/queues.ts QU2, QU4.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, type Effect, type Store } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { isLoomError } from "../src/kernel/errors.ts";
import { MAX_BLOCK_MS, rateLimitedFor } from "../src/runtime/rate-limits.ts";
import { runtimes, slow, until } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-redteam-fc-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const STORES = [
  { kind: "memory", open: (): Store => memoryStore() },
  { kind: "sqlite", open: (): Store => sqliteStore(join(dir, `r${files++}.db`)) },
];

/** `base` with some of its methods replaced (a store that fails or stalls on cue). */
function overridden(base: Store, methods: Partial<Store>): Store {
  return new Proxy(base, {
    get(target, prop) {
      if (Object.hasOwn(methods, prop)) return Reflect.get(methods, prop) as unknown;
      const value: unknown = Reflect.get(target, prop);
      return typeof value === "function" ? (value.bind(target) as unknown) : value;
    },
  });
}

describe.each(STORES)("flow-control attacks on the $kind store", ({ open }) => {
  const rt = runtimes();

  it("RL12: a claim of fractional, NaN or unsafe tokens fails the call with InvalidInputError; the run is not stopped for good", async () => {
    const store = open();
    let ran = 0;
    const effect: Effect<number, string> = {
      name: "bad-claim",
      limiter: (n) => ({ name: "m", inputTokens: n, outputTokens: 1 }),
      async run() {
        ran++;
        return "ran";
      },
    };
    const flow = flow$("rt-claim", async (ctx, n: number) =>
      ctx.execute(effect, n, { retry: false }),
    );
    const r = rt(store, { rateLimits: { m: { rpm: 100 } } }).registerFlow(flow);
    for (const n of [10.5, -1, 2 ** 60]) {
      const h = await r.start(flow, n);
      // Before RL12 the store's refusal stopped the run (RL11): it stayed `pending`, never ended.
      await until(async () => (await r.getState(h.id)).status === "failed");
      const outcome = await h.result();
      expect(outcome).toMatchObject({ status: "failed", error: { code: "LOOM_INVALID_INPUT" } });
    }
    expect(ran).toBe(0);
  });

  it("DB1: a debounced start of another flow on the same queue and key makes its own execution; neither body reads the other's input", async () => {
    const store = open();
    const seen: string[] = [];
    const a = flow$(
      "rt-deb-a",
      async (ctx, input: { a: string }) => {
        await ctx.run("see", () => seen.push(`a:${JSON.stringify(input)}`));
        return input;
      },
      { queue: "shared" },
    );
    const b = flow$(
      "rt-deb-b",
      async (ctx, input: { b: number }) => {
        await ctx.run("see", () => seen.push(`b:${JSON.stringify(input)}`));
        return input;
      },
      { queue: "shared" },
    );
    const r = rt(store, {}).registerFlow(a).registerFlow(b);
    const debounce = { key: "doc-1", ms: slow(200) };
    const ha = await r.start(a, { a: "x" }, { debounce });
    const hb = await r.start(b, { b: 7 }, { debounce });
    // Before DB1 scoped the key, b's start joined a's execution: a's body ran with { b: 7 }.
    expect(hb.id).not.toBe(ha.id);
    expect(await ha.result()).toMatchObject({ status: "completed", output: { a: "x" } });
    expect(await hb.result()).toMatchObject({ status: "completed", output: { b: 7 } });
    expect(seen.sort()).toEqual(['a:{"a":"x"}', 'b:{"b":7}']);
  });

  it("DB1: a debounced start by another principal never writes into an execution it does not own", async () => {
    const store = open();
    const f = flow$("rt-deb-p", async (_ctx, input: { t: string }) => input.t, { queue: "q-p" });
    const r = rt(store, { background: false }).registerFlow(f);
    const debounce = { key: "k", ms: 60_000 };
    const alice = await r.start(f, { t: "alice" }, { principal: "alice", debounce });
    const mallory = await r.start(f, { t: "mallory" }, { principal: "mallory", debounce });
    expect(mallory.id).not.toBe(alice.id);
    const state = await r.getState(alice.id, { as: "alice" });
    expect(state.input).toEqual({ t: "alice" });
    expect((await store.read(alice.id)).map((e) => e.kind)).toEqual(["EXECUTION_STARTED"]);
  });

  it("DB5: a start's own dedupe key may not take the debounce's prefix, so a debounce never replaces its input", async () => {
    const store = open();
    const f = flow$("rt-deb-d", async (_ctx, input: { t: string }) => input.t, { queue: "q-d" });
    const r = rt(store, { background: false }).registerFlow(f);
    const refused = await r
      .start(f, { t: "original" }, { id: "job", dedupe: 'debounce:["rt-deb-d",null,null,"k"]' })
      .catch((e: unknown) => e);
    expect(isLoomError(refused, "LOOM_INVALID_INPUT")).toBe(true);
    expect(await store.head("job")).toBe(-1);
    // Any other dedupe key and a debounce of the same text stay apart.
    await r.start(f, { t: "original" }, { id: "job", dedupe: "k" });
    const d = await r.start(f, { t: "injected" }, { debounce: { key: "k", ms: 60_000 } });
    expect(d.id).not.toBe("job");
    expect((await r.getState("job")).input).toEqual({ t: "original" });
  });

  it.each([
    [{ "retry-after-ms": "8000.5" }, 8001],
    [{ "retry-after": "1e30" }, MAX_BLOCK_MS],
  ])(
    "RL5: a 429 whose hint is no whole number of ms (%j) still blocks the limiter for the fleet",
    async (headers, blockMs) => {
      const store = open();
      const errors: Error[] = [];
      const effect: Effect<null, string> = {
        name: "too-many",
        limiter: () => ({ name: "m", inputTokens: 0, outputTokens: 1 }),
        async run() {
          throw Object.assign(new Error("429 Too Many Requests"), { status: 429, headers });
        },
      };
      const flow = flow$("rt-429", async (ctx) => ctx.execute(effect, null, { retry: false }));
      const r = rt(store, { rateLimits: { m: { rpm: 1000 } }, onError: (e) => errors.push(e) });
      r.registerFlow(flow);
      const before = Date.now();
      expect((await (await r.start(flow, null)).result()).status).toBe("failed");
      // Before RL5 rounded and bounded it, the store refused the time as no safe integer: the
      // refusal was reported, and nothing blocked the limiter.
      const view = await store.limiterView("m", Date.now());
      expect(errors).toEqual([]);
      expect(view.blockedUntilMs).toBeGreaterThanOrEqual(before + blockMs);
    },
  );

  it("RL2: a cancel that lands while the call's ask is in flight withdraws its place; no later call waits behind it", async () => {
    const base = open();
    let asks = 0;
    let inFlight: () => void = () => {};
    const asking = new Promise<void>((resolve) => (inFlight = resolve));
    let answer: () => void = () => {};
    const answered = new Promise<void>((resolve) => (answer = resolve));
    // The store holds b's second ask (its first as a waiter) until the test lets it answer.
    const store = overridden(base, {
      async reserve(...args) {
        if (args[2].executionId === "b" && ++asks === 2) {
          inFlight();
          await answered;
        }
        return base.reserve(...args);
      },
    });
    const gates = new Map<string, () => void>();
    const ran: string[] = [];
    const effect: Effect<string, string> = {
      name: "call",
      limiter: () => ({ name: "m", inputTokens: 0, outputTokens: 1 }),
      async run(id) {
        ran.push(id);
        await new Promise<void>((resolve) => gates.set(id, resolve));
        return id;
      },
    };
    const flow = flow$("rt-withdraw", async (ctx, id: string) =>
      ctx.execute(effect, id, { retry: false }),
    );
    const r = rt(store, { rateLimits: { m: { concurrent: 1 } } }).registerFlow(flow);
    const a = await r.start(flow, "a", { id: "a" });
    await until(() => ran.includes("a"));
    const b = await r.start(flow, "b", { id: "b" });
    await asking;
    await b.cancel("not needed");
    answer();
    expect((await b.result()).status).toBe("cancelled");
    // Before RL2 withdrew on every way out, b's place stayed until its waitUntilMs (3 s).
    await until(async () => (await store.limiterView("m", Date.now())).waiting.length === 0, 1000);
    gates.get("a")?.();
    expect((await a.result()).status).toBe("completed");
    expect(ran).toEqual(["a"]);
  });

  it("V8: a fork of a queued execution started with a dedupe key waits in the queue; the key stays its origin's", async () => {
    const store = open();
    const ran: string[] = [];
    const f = flow$(
      "rt-fork-dedupe",
      async (ctx, n: number) => {
        await ctx.run("see", () => ran.push(ctx.executionId));
        return n;
      },
      { queue: "q-fork" },
    );
    const r = rt(store, { background: false }).registerFlow(f);
    await r.start(f, 1, { id: "orig", dedupe: "job-1" });
    // Before V8 the fork carried the key, and S27 refused it while its origin waited.
    const forked = await r.fork("orig", 0, "forked");
    expect((await r.getState("forked")).status).toBe("queued");
    const again = await r.start(f, 2, { id: "again", dedupe: "job-1" }).catch((e: unknown) => e);
    expect(isLoomError(again, "LOOM_QUEUE_DUPLICATE")).toBe(true);
    rt(store, { queues: { "q-fork": { concurrency: 1 } } }).registerFlow(f);
    expect(await forked.result()).toMatchObject({ status: "completed", output: 1 });
    await until(() => ran.length === 2);
    expect(ran.sort()).toEqual(["forked", "orig"]);
  });

  it("QU4: a queue key or dedupe key with a lone surrogate is refused before anything is recorded", async () => {
    const store = open();
    const f = flow$("rt-keys", async (_ctx, n: number) => n, { queue: "q-keys" });
    const r = rt(store, { background: false }).registerFlow(f);
    // On PostgreSQL both were U+FFFD: one key, whose dedupe refused the other's start.
    for (const [i, options] of [{ key: "\ud800" }, { dedupe: "a\udc00" }].entries()) {
      const refused = await r.start(f, i, { id: `bad-${i}`, ...options }).catch((e: unknown) => e);
      expect(isLoomError(refused, "LOOM_INVALID_INPUT")).toBe(true);
      expect(await store.head(`bad-${i}`)).toBe(-1);
    }
    // Keys shaped like SQL or LIKE patterns, or any well-formed text, are keys like any other.
    for (const [i, key] of ["'; DROP TABLE executions; --", "%", "_", "日本語🙂", " "].entries()) {
      await r.start(f, i, { id: `ok-${i}`, key, dedupe: key });
    }
    const view = await store.queueView("q-keys", { nowMs: Date.now(), limit: 10 });
    expect(view.waiting.map((w) => w.key)).toEqual([
      "'; DROP TABLE executions; --",
      "%",
      "_",
      "日本語🙂",
      " ",
    ]);
  });

  it("DB4: a debounce of fractional or huge ms is refused naming the option, before anything is recorded", async () => {
    const store = open();
    const f = flow$("rt-deb-ms", async (_ctx, n: number) => n, { queue: "q-ms" });
    const r = rt(store, { background: false }).registerFlow(f);
    for (const debounce of [
      { key: "a", ms: 0.5 },
      { key: "b", ms: 1e300 },
      { key: "c", ms: 10, maxMs: 10.5 },
    ]) {
      await expect(r.start(f, 1, { debounce })).rejects.toThrow(/^debounce (ms|maxMs) must be/);
    }
    expect(await r.list({ status: ["queued"] })).toEqual([]);
  });

  it("RL4: a settle the store fails once is asked again; the call's concurrent slot is not held for its whole hold", async () => {
    const base = open();
    let failures = 0;
    const errors: Error[] = [];
    const store = overridden(base, {
      async settle(...args) {
        if (failures++ === 0) throw new Error("connection reset");
        return base.settle(...args);
      },
    });
    const effect: Effect<string, string> = {
      name: "call",
      limiter: () => ({ name: "m", inputTokens: 0, outputTokens: 1 }),
      async run(id) {
        return id;
      },
    };
    const flow = flow$("rt-settle", async (ctx, id: string) =>
      ctx.execute(effect, id, { retry: false }),
    );
    const r = rt(store, { rateLimits: { m: { concurrent: 1 } }, onError: (e) => errors.push(e) });
    r.registerFlow(flow);
    expect((await (await r.start(flow, "a")).result()).status).toBe("completed");
    // Before RL4 asked again, a's grant held the only slot for HOLD_MS (ten minutes): b waited.
    expect((await base.limiterView("m", Date.now())).inFlight).toBe(0);
    expect((await (await r.start(flow, "b")).result()).status).toBe("completed");
    expect(errors).toEqual([]);
  });

  it("QU4: a flow's queue key(input) that throws refuses the start with InvalidInputError, recording nothing", async () => {
    const store = open();
    const f = flow$("rt-key-throws", async () => 1, {
      queue: { name: "q-kt", key: (input: { user?: { id: string } }) => input.user!.id },
    });
    const r = rt(store, { background: false }).registerFlow(f);
    const refused = await r.start(f, {}, { id: "kt" }).catch((e: unknown) => e);
    // Before, the start threw the key function's own TypeError.
    expect(isLoomError(refused, "LOOM_INVALID_INPUT")).toBe(true);
    expect(await store.head("kt")).toBe(-1);
  });

  it("RL12: a step timeout of a fractional or huge number of ms does not stop the limited call's run", async () => {
    const store = open();
    const effect: Effect<null, string> = {
      name: "timed",
      limiter: () => ({ name: "m", inputTokens: 0, outputTokens: 0 }),
      async run() {
        return "ran";
      },
    };
    const r = rt(store, { rateLimits: { m: { rpm: 100 } } });
    for (const [i, timeoutMs] of [1500.5, 1e300].entries()) {
      const flow = flow$(`rt-timeout-${i}`, async (ctx) =>
        ctx.execute(effect, null, { retry: false, timeoutMs }),
      );
      r.registerFlow(flow);
      const h = await r.start(flow, null);
      // Before, the ask's holdUntilMs was no safe integer: the store refused it, the run stopped.
      await until(async () => (await r.getState(h.id)).status === "completed");
    }
  });

  it.each([{ maxActive: 2.5 }, { leaseTtlMs: 20_000.5 }])(
    "QU2: a runtime made with %j admits its queued executions",
    async (options) => {
      const store = open();
      const errors: Error[] = [];
      const f = flow$("rt-room", async (_ctx, n: number) => n, { queue: "q-room" });
      const r = rt(store, { ...options, onError: (e) => errors.push(e) }).registerFlow(f);
      const h = await r.start(f, 7);
      // Before, the store refused every admission (its room or lease time was no integer).
      await until(async () => (await r.getState(h.id)).status === "completed");
      expect(errors).toEqual([]);
    },
  );
});

describe("flow-control attacks: the pieces", () => {
  it("RL5: rateLimitedFor answers whole milliseconds, rounded up, at most MAX_BLOCK_MS", () => {
    const e = (headers: Record<string, string>) => ({ status: 429, headers });
    expect(rateLimitedFor(e({ "retry-after-ms": "1.5" }))).toBe(2);
    expect(rateLimitedFor(e({ "x-ratelimit-reset-tokens": "1.005s" }))).toBe(1005);
    expect(rateLimitedFor(e({ "retry-after": "1e30" }))).toBe(MAX_BLOCK_MS);
    expect(rateLimitedFor(e({ "retry-after-ms": "-5" }))).toBe(0);
  });

  it("RL6: a limiter's name with NUL or a lone surrogate is refused when the runtime is made", () => {
    // On PostgreSQL a name with NUL failed every reserve: its calls' runs stopped for good (RL11).
    for (const name of ["a\u0000b", "\ud800"]) {
      expect(() =>
        createRuntime({ store: memoryStore(), rateLimits: { [name]: { rpm: 5 } } }),
      ).toThrow(/rate limiter's name/);
    }
  });
});
