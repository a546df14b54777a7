/**
 * What waits, and why (issue 26 item 4; runtime/verbs-flow-control.ts FV1..FV6,
 * runtime/flow-control-estimates.ts FE1..FE4), on the memory and SQLite stores: a queue's waiters
 * in admission order with 1-based positions, a full key's waiter with its queue, key and
 * position, a call waiting on a full limiter with its limiter and position, the estimates, and
 * an admitted or granted execution leaving the views.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { flow$, memoryStore, type Effect, type Store } from "../src/index.ts";
import { limiterWait, queueWaits } from "../src/runtime/flow-control-estimates.ts";
import { formatWait, waitSentence, waitText } from "../src/analytics/waits.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import type { LimiterView, QueueView } from "../src/store/spi.ts";
import { runtimes, until } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-fcv-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const STORES = [
  { kind: "memory", open: (): Store => memoryStore() },
  { kind: "sqlite", open: (): Store => sqliteStore(join(dir, `v${files++}.db`)) },
];

/** Gates the test opens by id: a queued flow's body, or an effect's call, holds until opened. */
function gates() {
  const open = new Map<string, () => void>();
  const running = new Set<string>();
  const hold = async (id: string): Promise<void> => {
    running.add(id);
    await new Promise<void>((resolve) => open.set(id, resolve));
    running.delete(id);
  };
  return { hold, running, open: (id: string) => open.get(id)?.() };
}

interface Item {
  id: string;
  key?: string;
}

describe.each(STORES)("flow-control views on the $kind store (issue 26 item 4)", ({ open }) => {
  const rt = runtimes();

  it("FV1, FV2, FV4: waiters in admission order (priority, then time), positions from 1", async () => {
    const store = open();
    const flow = flow$("fv-order", async () => "ran", { queue: "fc" });
    const viewer = rt(store, { background: false }).registerFlow(flow);
    await viewer.start(flow, null, { id: "a" });
    await viewer.start(flow, null, { id: "b", priority: -1 });
    await viewer.start(flow, null, { id: "c" });
    const [q, ...others] = await viewer.queues();
    expect(others).toEqual([]);
    expect(q).toMatchObject({ name: "fc", active: 0, waitingCount: 3 });
    expect(q?.waiting.map((w) => [w.executionId, w.position, w.priority])).toEqual([
      ["b", 1, -1],
      ["a", 2, 0],
      ["c", 3, 0],
    ]);
    // FV2, FE2: given no `queues`, this runtime knows no limits, and estimates nothing.
    expect(q?.limits).toBeUndefined();
    expect(q?.waiting.every((w) => w.expectedWaitMs === undefined)).toBe(true);
    const why = await viewer.waits();
    expect(why.get("a")).toEqual({ kind: "queue", queue: "fc", position: 2, waitingCount: 3 });
    // FV2: a runtime given `queues` knows them; FE1: a free slot is no wait (0).
    const knowing = rt(store, { background: false, queues: { fc: { concurrency: 2 } } });
    const [k] = await knowing.queues({ limit: 2 });
    expect(k?.limits).toEqual({ concurrency: 2 });
    expect(k?.waiting.map((w) => [w.executionId, w.expectedWaitMs])).toEqual([
      ["b", 0],
      ["a", 0],
    ]);
    expect(k?.waitingCount).toBe(3);
  });

  it("FV1, FV4, FE1: a full key's waiter shows its queue, key and position; admitted, it leaves", async () => {
    const store = open();
    const g = gates();
    const flow = flow$(
      "fv-keys",
      async (ctx, item: Item) => ctx.run("work", () => g.hold(item.id)),
      { queue: { name: "fc", key: (i: Item) => i.key ?? "" } },
    );
    const limits = { fc: { concurrency: 2, keyConcurrency: 1 } };
    const r = rt(store, { queues: limits }).registerFlow(flow);
    const u1a = await r.start(flow, { id: "u1-a", key: "u1" }, { id: "u1-a" });
    await until(() => g.running.has("u1-a"));
    await r.start(flow, { id: "u1-b", key: "u1" }, { id: "u1-b" });
    await r.start(flow, { id: "u2-a", key: "u2" }, { id: "u2-a" });
    await until(() => g.running.has("u2-a"));
    const [q] = await r.queues();
    expect(q).toMatchObject({ name: "fc", active: 2, activeByKey: { u1: 1, u2: 1 } });
    expect(q?.waiting.map((w) => [w.executionId, w.key, w.position])).toEqual([["u1-b", "u1", 1]]);
    // FE2: a slot must free, and no ended execution of the queue tells how long one is held.
    expect(q?.meanHoldMs).toBeUndefined();
    expect((await r.waits()).get("u1-b")).toEqual({
      kind: "queue",
      queue: "fc",
      key: "u1",
      position: 1,
      waitingCount: 1,
    });
    // u1-a ends: u1-b is admitted and leaves the view (FV4).
    g.open("u1-a");
    await u1a.result();
    await until(() => g.running.has("u1-b"));
    expect((await r.waits()).has("u1-b")).toBe(false);
    // FE1: now a hold time is known: u1-c needs u1's one slot, held about H.
    await r.start(flow, { id: "u1-c", key: "u1" }, { id: "u1-c" });
    const [after] = await r.queues();
    expect(after?.meanHoldMs).toBeGreaterThanOrEqual(0);
    expect(after?.waiting).toEqual([
      expect.objectContaining({
        executionId: "u1-c",
        position: 1,
        expectedWaitMs: after?.meanHoldMs,
      }),
    ]);
    for (const id of ["u1-b", "u2-a"]) g.open(id);
    await until(() => g.running.has("u1-c"));
    g.open("u1-c");
    await until(async () => (await r.queues()).length === 0);
  });

  it("FV3, FV4, FV5, FE3: calls waiting on a full limiter show it and their places; granted, they leave", async () => {
    const store = open();
    const g = gates();
    const model: Effect<{ id: string; out: number; used: number }, string> = {
      name: "model",
      limiter: (c) => ({ name: "m", inputTokens: 0, outputTokens: c.out }),
      async run(c, ectx) {
        await g.hold(c.id);
        ectx.meter({ tokens: { input: 0, output: c.used } });
        return c.id;
      },
    };
    const flow = flow$("fv-limited", async (ctx, c: { id: string; out: number; used: number }) =>
      ctx.execute(model, c, { retry: false }),
    );
    const rateLimits = { m: { outputTpm: 100 } };
    // Two processes: each holds one place in the store's line (FV5).
    const one = rt(store, { rateLimits }).registerFlow(flow);
    const two = rt(store, { rateLimits }).registerFlow(flow);
    const a = await one.start(flow, { id: "a", out: 60, used: 10 }, { id: "a" });
    await until(() => g.running.has("a"));
    await one.start(flow, { id: "b", out: 60, used: 60 }, { id: "b" });
    const line = async () => (await store.limiterView("m", Date.now())).waiting;
    await until(async () => (await line()).length === 1);
    const c = await two.start(flow, { id: "c", out: 60, used: 60 }, { id: "c" });
    await until(async () => (await line()).length === 2);
    const [m] = await one.limiters();
    expect(m).toMatchObject({ name: "m", requests: 1, outputTokens: 60, inFlight: 1 });
    expect(m?.limit).toEqual({ windowMs: 60_000, outputTokens: 100 });
    // FE3: 60 in the window of 100, each ask ~60: #1 needs 20 freed, #2 80, at 100 per minute.
    expect(m?.waiting.map((w) => [w.executionId, w.position, w.expectedWaitMs])).toEqual([
      ["b", 1, 12_000],
      ["c", 2, 48_000],
    ]);
    const why = await two.waits();
    expect(why.get("c")).toEqual({
      kind: "limiter",
      limiter: "m",
      position: 2,
      expectedWaitMs: 48_000,
    });
    expect(why.has("a")).toBe(false);
    // a settles with 10 used: b (60) fits and is granted, leaving the line; c moves up to #1.
    g.open("a");
    await a.result();
    await until(() => g.running.has("b"));
    await until(async () => (await line()).length === 1);
    const after = await two.waits();
    expect(after.has("b")).toBe(false);
    expect(after.get("c")).toMatchObject({ kind: "limiter", limiter: "m", position: 1 });
    // a (10) and b (60) fill the window past c's 60 until a minute has passed: c is cancelled.
    g.open("b");
    expect(await c.cancel("test over")).toBe(true);
    await until(async () => (await two.waits()).size === 0);
  });
});

describe("flow-control estimates (FE1..FE4)", () => {
  const now = 1_000_000;
  const queue = (over: Partial<QueueView>): QueueView => ({
    queue: "q",
    active: 0,
    activeByKey: {},
    waiting: [],
    waitingCount: 0,
    ...over,
  });
  const waiter = (id: string, key?: string, notBeforeMs?: number) => ({
    executionId: id,
    flow: "f",
    priority: 0,
    createdAtMs: now - 1,
    ...(key === undefined ? {} : { key }),
    ...(notBeforeMs === undefined ? {} : { notBeforeMs }),
  });

  it("FE1: slots to free times the mean hold over the slots; a key's slots; a debounce's time", () => {
    const view = queue({
      active: 3,
      activeByKey: { u1: 1 },
      waiting: [waiter("w1"), waiter("w2", "u1"), waiter("w3"), waiter("w4", "u2", now + 90_000)],
      waitingCount: 4,
    });
    // Concurrency 4, 3 active: one free slot. w1 fits; w2 needs 1 queue slot (H/4) but u1's one
    // key slot is held (H/1); w3 needs 2 (2H/4); w4 needs 3 (3H/4) but waits 90 s for its debounce.
    expect(queueWaits(view, { concurrency: 4, keyConcurrency: 1 }, 8000, now)).toEqual([
      0, 8000, 4000, 90_000,
    ]);
    // FE2: with a slot to free and no hold time known, unknowable; unknown limits, all unknowable.
    expect(queueWaits(view, { concurrency: 4 }, undefined, now)).toEqual([
      0,
      undefined,
      undefined,
      undefined,
    ]);
    expect(queueWaits(view, undefined, 8000, now)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    // Unlimited: only the debounce waits.
    expect(queueWaits(view, {}, undefined, now)).toEqual([0, 0, 0, 90_000]);
  });

  it("FE3, FE4: the window refills at its limit per window; a block bounds it; a full `concurrent` is unknowable", () => {
    const view: LimiterView = {
      limiter: "m",
      requests: 4,
      inputTokens: 400,
      outputTokens: 0,
      inFlight: 2,
      waiting: [],
    };
    const limit = { windowMs: 60_000, requests: 10, inputTokens: 500 };
    // Input: 400 + 100 (one mean ask) - 500 = 0 over for #1; #2: 100 over -> 100 * 60 s / 500.
    expect(limiterWait(view, limit, 1, now)).toBe(0);
    expect(limiterWait(view, limit, 2, now)).toBe(12_000);
    expect(limiterWait({ ...view, blockedUntilMs: now + 30_000 }, limit, 2, now)).toBe(30_000);
    expect(limiterWait(view, { ...limit, concurrent: 2 }, 1, now)).toBeUndefined();
    expect(limiterWait(view, undefined, 1, now)).toBeUndefined();
  });
});

describe("what waits, in words (analytics/waits.ts W1..W3)", () => {
  it("W1: a wait reads in s, min or h; 0 is now; unknown is -", () => {
    expect([0, 400, 1400, 59_400, 59_600, 150_000, 5_400_000, undefined].map(formatWait)).toEqual([
      "now",
      "~1 s",
      "~1 s",
      "~59 s",
      "~60 s",
      "~3 min",
      "~1.5 h",
      "-",
    ]);
  });

  it("W2, W3: a queue's place with its key, a limiter's, with the wait when known", () => {
    const queued = { kind: "queue" as const, queue: "fc", key: "u1", position: 3 };
    expect(waitText({ ...queued, expectedWaitMs: 12_000 })).toBe("queue fc (key u1) #3 ~12 s");
    expect(waitSentence({ ...queued, expectedWaitMs: 12_000 })).toBe(
      "waiting in queue fc (key u1) #3, ~12 s",
    );
    const limited = { kind: "limiter" as const, limiter: "openai:gpt-4o-mini", position: 2 };
    expect(waitText(limited)).toBe("limiter openai:gpt-4o-mini #2");
    expect(waitSentence(limited)).toBe("waiting on limiter openai:gpt-4o-mini #2");
    expect(waitSentence({ ...limited, expectedWaitMs: 0 })).toBe(
      "waiting on limiter openai:gpt-4o-mini #2, fits now",
    );
    expect(waitText({ kind: "queue", queue: "batch", position: 1 })).toBe("queue batch #1");
  });
});
