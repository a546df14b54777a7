/**
 * Rate limits in one process (issue 26; runtime/rate-limits.ts RL1..RL7), on the memory and
 * SQLite stores: a call reserves before it runs and waits while the window is full; settling
 * gives unused tokens back; a wait ends with a cancel, withdrawn, the call never run; a call that
 * could never fit is refused; a 429 blocks the limiter; the LLM effects name their limiter;
 * `rateLimits` is checked when the runtime is made.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  InvalidInputError,
  memoryStore,
  type Effect,
  type MiddlewareContext,
  type RateLimitOptions,
  type Store,
} from "../src/index.ts";
import { openAiEffect } from "../src/providers/openai.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { rateLimitedFor, rateLimitMiddleware } from "../src/runtime/rate-limits.ts";
import { LimiterLine } from "../src/runtime/limiter-line.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { runtimes, slow, until } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-rl-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const STORES = [
  { kind: "memory", open: (): Store => memoryStore() },
  { kind: "sqlite", open: (): Store => sqliteStore(join(dir, `r${files++}.db`)) },
];

interface Call {
  id: string;
  out: number;
  used?: number;
  /** Fail with a provider's 429 asking to retry after this many ms. */
  tooManyFor?: number;
}

/** An effect on the limiter "m" that holds until released, and reports `used` output tokens. */
function gatedEffect() {
  const running = new Set<string>();
  const ran: string[] = [];
  const gates = new Map<string, () => void>();
  const effect: Effect<Call, string> = {
    name: "model",
    limiter: (c) => ({ name: "m", inputTokens: 0, outputTokens: c.out }),
    async run(c, ectx) {
      running.add(c.id);
      ran.push(c.id);
      await new Promise<void>((resolve) => gates.set(c.id, resolve));
      running.delete(c.id);
      ectx.meter({ tokens: { input: 0, output: c.used ?? c.out } });
      if (c.tooManyFor !== undefined) {
        const headers = { "retry-after-ms": String(c.tooManyFor) };
        throw Object.assign(new Error("429 Too Many Requests"), { status: 429, headers });
      }
      return c.id;
    },
  };
  return { effect, running, ran, open: (id: string) => gates.get(id)?.() };
}

describe.each(STORES)("rate limits on the $kind store (issue 26)", ({ open }) => {
  const rt = runtimes();

  it("RL1, RL2, RL4: a full window makes a call wait; what a call did not use is given back", async () => {
    const store = open();
    const g = gatedEffect();
    const flow = flow$("rl-wait", async (ctx, c: Call) =>
      ctx.execute(g.effect, c, { retry: false }),
    );
    const r = rt(store, { rateLimits: { m: { outputTpm: 100, windowMs: 3_600_000 } } });
    r.registerFlow(flow);
    const a = await r.start(flow, { id: "a", out: 40, used: 10 });
    const b = await r.start(flow, { id: "b", out: 40, used: 40 });
    await until(() => g.running.size === 2);
    // 80 of 100 reserved: c (40) waits, in the store's line.
    const c = await r.start(flow, { id: "c", out: 40 });
    await until(async () => (await store.limiterView("m", Date.now())).waiting.length === 1);
    expect(g.ran).toEqual(["a", "b"]);
    // a settles with 10 used: 50 charged in the window, so c (40) fits, within the same window.
    g.open("a");
    await until(() => g.running.has("c"));
    const view = await store.limiterView("m", Date.now());
    expect(view.outputTokens).toBe(10 + 40 + 40);
    expect(view.waiting).toEqual([]);
    g.open("b");
    g.open("c");
    for (const h of [a, b, c]) expect((await h.result()).status).toBe("completed");
  });

  it("RL2: a waiting call ends with a cancel: withdrawn from the line, never run", async () => {
    const store = open();
    const g = gatedEffect();
    const flow = flow$("rl-cancel", async (ctx, c: Call) => ctx.execute(g.effect, c));
    const r = rt(store, { rateLimits: { m: { concurrent: 1 } } }).registerFlow(flow);
    const a = await r.start(flow, { id: "a", out: 1 });
    await until(() => g.running.has("a"));
    const b = await r.start(flow, { id: "b", out: 1 });
    await until(async () => (await store.limiterView("m", Date.now())).waiting.length === 1);
    expect(await b.cancel("no longer needed")).toBe(true);
    expect((await b.result()).status).toBe("cancelled");
    await until(async () => (await store.limiterView("m", Date.now())).waiting.length === 0);
    g.open("a");
    expect((await a.result()).status).toBe("completed");
    expect(g.ran).toEqual(["a"]);
  });

  it("RL3: a call that could never fit is refused before it waits or runs", async () => {
    const store = open();
    const g = gatedEffect();
    const flow = flow$("rl-never", async (ctx, c: Call) => ctx.execute(g.effect, c));
    const r = rt(store, { rateLimits: { m: { outputTpm: 100 } } }).registerFlow(flow);
    const outcome = await (await r.start(flow, { id: "big", out: 101 })).result();
    expect(outcome.status).toBe("failed");
    expect(outcome.error?.code).toBe("LOOM_INVALID_INPUT");
    expect(outcome.error?.message).toMatch(/could never run/);
    expect(g.ran).toEqual([]);
  });

  it("RL5: a provider's 429 blocks the limiter for every caller until its retry-after", async () => {
    const store = open();
    const g = gatedEffect();
    const flow = flow$("rl-429", async (ctx, c: Call) =>
      ctx.execute(g.effect, c, { retry: false }),
    );
    const r = rt(store, { rateLimits: { m: { rpm: 1000 } } }).registerFlow(flow);
    const a = await r.start(flow, { id: "a", out: 1, tooManyFor: slow(60_000) });
    await until(() => g.running.has("a"));
    const before = Date.now();
    g.open("a");
    expect((await a.result()).status).toBe("failed");
    const view = await store.limiterView("m", Date.now());
    expect(view.blockedUntilMs).toBeGreaterThanOrEqual(before + slow(60_000));
    const b = await r.start(flow, { id: "b", out: 1 });
    await until(async () => (await store.limiterView("m", Date.now())).waiting.length === 1);
    expect(g.ran).toEqual(["a"]);
    await b.cancel("blocked");
  });
});

describe("rate limits: the pieces (issue 26)", () => {
  it("RL5: rateLimitedFor reads each provider's retry hint, and only a 429", () => {
    const e = (headers: Record<string, string>, status = 429) => ({ status, headers });
    expect(rateLimitedFor(e({ "retry-after-ms": "1500" }))).toBe(1500);
    expect(rateLimitedFor(e({ "retry-after": "7" }))).toBe(7000);
    expect(rateLimitedFor(e({ "x-ratelimit-reset-tokens": "6m0s" }))).toBe(360_000);
    expect(rateLimitedFor(e({ "x-ratelimit-reset-requests": "12ms" }))).toBe(12);
    const soon = new Date(Date.now() + 30_000).toISOString();
    const anthropic = rateLimitedFor(e({ "anthropic-ratelimit-output-tokens-reset": soon }));
    expect(anthropic).toBeGreaterThan(20_000);
    expect(anthropic).toBeLessThanOrEqual(30_000);
    expect(rateLimitedFor(e({}))).toBe(1000);
    expect(rateLimitedFor(e({ "retry-after": "7" }, 500))).toBeUndefined();
    const headers = new Headers({ "retry-after": "2" });
    expect(rateLimitedFor({ status: 429, headers })).toBe(2000);
  });

  it("RL9: two calls of one recorded attempt (two owners of one execution) are two grants, both charged", async () => {
    const store = memoryStore();
    const limits = { m: { windowMs: 60_000, outputTokens: 100 } };
    const deps = { store, limits, now: () => Date.now(), report: () => {}, stop: () => {} };
    const mw = rateLimitMiddleware(deps);
    const ctx = (): MiddlewareContext => ({
      executionId: "x",
      stepId: "llm#0",
      attempt: 1,
      idempotencyKey: "x/llm#0",
      signal: new AbortController().signal,
      resources: {},
      meter: () => {},
      effect: "llm",
      options: {},
      budgets: [],
      limiter: { name: "m", inputTokens: 0, outputTokens: 40 },
      metered: () => ({ tokens: { input: 0, output: 40 } }),
      emit: () => {},
      now: () => Date.now(),
      invoke: () => Promise.resolve("answer"),
      failedAttempt: () => Promise.resolve(),
      beginAttempt: () => Promise.resolve(),
    });
    await mw(ctx(), () => Promise.resolve("first owner's call"));
    await mw(ctx(), () => Promise.resolve("second owner's call"));
    const view = await store.limiterView("m", Date.now());
    expect(view).toMatchObject({ requests: 2, outputTokens: 80 });
  });

  it("LL1, LL2: a process's line lets one call at a time ask the store, oldest first; an aborted one leaves it", async () => {
    const line = new LimiterLine();
    const order: string[] = [];
    const a = new AbortController();
    const b = new AbortController();
    const c = new AbortController();
    await line.enter(a.signal);
    const second = line.enter(b.signal).then(() => order.push("b"));
    const third = line.enter(c.signal).then(
      () => order.push("c"),
      (e: unknown) => order.push(`c aborted: ${(e as Error).message}`),
    );
    expect(line.behind).toBe(2);
    c.abort(new Error("cancelled"));
    await third;
    expect(line.behind).toBe(1);
    line.leave();
    await second;
    line.leave();
    expect(order).toEqual(["c aborted: cancelled", "b"]);
    // Empty again: the next call enters at once.
    await line.enter(new AbortController().signal);
    expect(line.behind).toBe(0);
  });

  it("RL11: a store that fails the reservation stops the execution's run; the call never runs", async () => {
    const store = memoryStore();
    const lost = new Error("lost reply of reserve");
    const failing = { ...store, reserve: () => Promise.reject(lost) };
    const stopped: [string, Error][] = [];
    const mw = rateLimitMiddleware({
      store: failing,
      limits: { m: { windowMs: 60_000, requests: 5 } },
      now: () => Date.now(),
      report: () => {},
      stop: (id, e) => stopped.push([id, e]),
    });
    let ran = false;
    const ctx = {
      executionId: "x",
      stepId: "llm#0",
      attempt: 1,
      signal: new AbortController().signal,
      options: {},
      effect: "llm",
      limiter: { name: "m", inputTokens: 0, outputTokens: 1 },
    } as unknown as MiddlewareContext;
    await expect(mw(ctx, () => ((ran = true), Promise.resolve("x")))).rejects.toBe(lost);
    expect(ran).toBe(false);
    expect(stopped).toEqual([["x", lost]]);
  });

  it("the LLM effects reserve with <provider>:<model>, or the limiter they name", () => {
    const input = {
      messages: [{ role: "user" as const, content: "x".repeat(40) }],
      maxTokens: 300,
    };
    expect(openAiEffect({ model: "gpt-4o" }).limiter?.(input)).toEqual({
      name: "openai:gpt-4o",
      inputTokens: 10,
      outputTokens: 300,
    });
    expect(
      anthropicEffect({ model: "claude-sonnet-4-5", limiter: "key-2" }).limiter?.(input)?.name,
    ).toBe("key-2");
    expect(openAiEffect({ model: "gpt-4o", limiter: false }).limiter?.(input)).toBeUndefined();
    expect(() => openAiEffect({ model: "gpt-4o", limiter: "" })).toThrow(/limiter/);
  });

  it("RL6: rateLimits is checked when the runtime is made", () => {
    const make = (rateLimits: unknown) => () =>
      createRuntime({
        store: memoryStore(),
        background: false,
        rateLimits: rateLimits as Record<string, RateLimitOptions>,
      });
    expect(make({ m: { outputTpm: 0 } })).toThrow(InvalidInputError);
    expect(make({ m: { outputTpm: 0 } })).toThrow(/outputTpm/);
    expect(make({ m: { perMinute: 3 } })).toThrow(/unknown keys/);
    expect(make({ m: {} })).toThrow(/limits nothing/);
    expect(make([])).toThrow(/rateLimits/);
  });
});
