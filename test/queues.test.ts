/**
 * Queues in one process (issue 26; runtime/queues.ts QU1..QU5, fold/queue.ts QF1..QF3,
 * runtime/debounce.ts DB1..DB4), on the memory and SQLite stores: a queued start runs nothing
 * until admitted; the queue's concurrency, per-key concurrency and priorities hold; dedupe is
 * refused before anything is recorded; debounced starts make one execution with the last input;
 * a queued execution can be cancelled; an admission that crashed before its record holds its slot
 * until its lease expires, then the execution is admitted again.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { flow$, memoryStore, type FlowOptions, type Store } from "../src/index.ts";
import { isLoomError } from "../src/kernel/errors.ts";
import { foldAll } from "../src/fold/fold.ts";
import type { Envelope } from "../src/kernel/events.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { offsetClock, runtimes, slow, until } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-queues-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const STORES = [
  { kind: "memory", open: (): Store => memoryStore() },
  { kind: "sqlite", open: (): Store => sqliteStore(join(dir, `q${files++}.db`)) },
];

/** A flow whose executions wait on a gate the test opens, recording which ran and when. */
function gated(name: string, options: FlowOptions<{ id: string; key?: string }, string>) {
  const gates = new Map<string, () => void>();
  const running = new Set<string>();
  const order: string[] = [];
  let most = 0;
  const flow = flow$(
    name,
    async (ctx, input: { id: string; key?: string }) => {
      await ctx.run("work", async () => {
        running.add(input.id);
        order.push(input.id);
        most = Math.max(most, running.size);
        await new Promise<void>((resolve) => gates.set(input.id, resolve));
        running.delete(input.id);
      });
      return input.id;
    },
    options,
  );
  return {
    flow,
    running,
    order,
    most: () => most,
    open: (id: string) => gates.get(id)?.(),
    openAll: () => [...gates.values()].forEach((g) => g()),
  };
}

describe.each(STORES)("queues on the $kind store (issue 26)", ({ open }) => {
  const rt = runtimes();

  it("QU1, QF1: a queued start is recorded queued and runs nothing until its queue admits it", async () => {
    const store = open();
    const g = gated("q-one", { queue: { name: "solo" } });
    const recorder = rt(store, { background: false }).registerFlow(g.flow);
    const h = await recorder.start(g.flow, { id: "a" }, { id: "a" });
    const state = await recorder.getState("a");
    expect(state.status).toBe("queued");
    expect(state._queue).toMatchObject({ name: "solo", priority: 0 });
    expect((await recorder.list({ status: ["queued"] })).map((x) => x.executionId)).toEqual(["a"]);
    expect(g.order).toEqual([]);
    // Another runtime with a background loop admits it.
    rt(store, { queues: { solo: { concurrency: 1 } } }).registerFlow(g.flow);
    await until(() => g.running.has("a"));
    g.openAll();
    expect(await h.result()).toMatchObject({ status: "completed", output: "a" });
    const log = await store.read("a");
    const kinds = log.map((e) => e.kind);
    // Nothing of the body before its admission (a long step may also write its STEP_STARTED).
    expect(kinds.slice(0, 2)).toEqual(["EXECUTION_STARTED", "EXECUTION_ADMITTED"]);
    expect(kinds.slice(-2)).toEqual(["STEP_COMPLETED", "EXECUTION_COMPLETED"]);
    expect(foldAll(log)._queue?.admittedAt).toBe(log[1]?.at);
  });

  it("S26, QU2: concurrency 2 with one per key: a full key is passed over, never two of a key, priority first", async () => {
    const store = open();
    const g = gated("q-keys", { queue: { name: "k", key: (i: { key?: string }) => i.key ?? "" } });
    const r = rt(store, { background: false }).registerFlow(g.flow);
    const starts = [
      ["a1", "a", 0],
      ["a2", "a", 0],
      ["b1", "b", 5],
      ["c1", "c", -1],
    ] as const;
    const handles = [];
    for (const [id, key, priority] of starts) {
      handles.push(await r.start(g.flow, { id, key }, { id, priority }));
    }
    rt(store, { queues: { k: { concurrency: 2, keyConcurrency: 1 } } }).registerFlow(g.flow);
    // c1 (priority -1) first, then a1 (oldest of priority 0); a2's key is full, b1 waits.
    await until(() => g.running.size === 2);
    expect([...g.running].sort()).toEqual(["a1", "c1"]);
    g.open("a1");
    // a2 is of a1's key and older than b1, but a's slot was a1's: now free, a2 is next.
    await until(() => g.running.has("a2"));
    expect(g.running.has("b1")).toBe(false);
    g.open("c1");
    await until(() => g.running.has("b1"));
    g.openAll();
    for (const h of handles) expect((await h.result()).status).toBe("completed");
    expect(g.most()).toBe(2);
    expect(g.order).toEqual(["c1", "a1", "a2", "b1"]);
  });

  it("S27: a start whose dedupe key waits in the queue is refused, writing nothing; free once admitted", async () => {
    const store = open();
    const g = gated("q-dedupe", { queue: "d" });
    const recorder = rt(store, { background: false }).registerFlow(g.flow);
    await recorder.start(g.flow, { id: "first" }, { id: "first", dedupe: "job-1" });
    const refused = await recorder
      .start(g.flow, { id: "second" }, { id: "second", dedupe: "job-1" })
      .catch((e: unknown) => e);
    expect(isLoomError(refused, "LOOM_QUEUE_DUPLICATE")).toBe(true);
    expect((refused as { details?: unknown }).details).toEqual({ existingId: "first" });
    expect(await store.head("second")).toBe(-1);
    rt(store, {}).registerFlow(g.flow);
    await until(() => g.running.has("first"));
    // Admitted: the key is free again.
    await recorder.start(g.flow, { id: "third" }, { id: "third", dedupe: "job-1" });
    g.openAll();
    await until(() => g.order.includes("third"));
    g.openAll();
  });

  it("DB1..DB3: debounced starts within the window make one execution that runs with the last input", async () => {
    const store = open();
    const seen: string[] = [];
    const flow = flow$(
      "q-debounce",
      async (ctx, input: { text: string }) => {
        await ctx.run("see", () => seen.push(input.text));
        return input.text;
      },
      { queue: "typing" },
    );
    const r = rt(store, {}).registerFlow(flow);
    const debounce = { key: "doc-7", ms: slow(1000) };
    const a = await r.start(flow, { text: "h" }, { debounce });
    const b = await r.start(flow, { text: "he" }, { debounce });
    const c = await r.start(flow, { text: "hello" }, { debounce });
    expect(new Set([a.id, b.id, c.id]).size).toBe(1);
    expect(await c.result()).toMatchObject({ status: "completed", output: "hello" });
    expect(seen).toEqual(["hello"]);
    const kinds = (await store.read(a.id)).map((e: Envelope) => e.kind);
    expect(kinds.filter((k) => k === "START_DEBOUNCED")).toHaveLength(2);
    // DB3: after it ran, the key starts a new execution.
    const d = await r.start(flow, { text: "again" }, { debounce });
    expect(d.id).not.toBe(a.id);
    expect(await d.result()).toMatchObject({ status: "completed", output: "again" });
  });

  it("a queued execution can be cancelled: it ends cancelled and its body never runs", async () => {
    const store = open();
    const g = gated("q-cancel", { queue: "c" });
    const recorder = rt(store, { background: false }).registerFlow(g.flow);
    const h = await recorder.start(g.flow, { id: "x" }, { id: "x" });
    expect(await h.cancel("not needed")).toBe(true);
    expect((await h.result()).status).toBe("cancelled");
    rt(store, {}).registerFlow(g.flow);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(g.order).toEqual([]);
  });

  it("QU3: an admission that crashed before its record holds the slot until its lease expires, then it is admitted again", async () => {
    const store = open();
    const g = gated("q-crash", { queue: "z" });
    const recorder = rt(store, { background: false }).registerFlow(g.flow);
    await recorder.start(g.flow, { id: "p" }, { id: "p" });
    await recorder.start(g.flow, { id: "q" }, { id: "q" });
    // A process that admitted "p" and died before appending EXECUTION_ADMITTED.
    const taken = await store.admitQueued("dead-owner", {
      queue: "z",
      limits: { concurrency: 1 },
      flows: ["q-crash"],
      limit: 1,
      ttlMs: 60_000,
      nowMs: Date.now(),
    });
    expect(taken.map((t) => t.executionId)).toEqual(["p"]);
    const clock = offsetClock();
    rt(store, { clock, queues: { z: { concurrency: 1 } } }).registerFlow(g.flow);
    // While the dead owner's lease lives, "p" holds the only slot: "q" is not admitted.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(g.order).toEqual([]);
    // Expired: "p" is admitted again and runs; then "q".
    clock.advance(61_000);
    await until(() => g.running.has("p"));
    g.open("p");
    await until(() => g.running.has("q"));
    g.openAll();
    expect((await store.read("p")).filter((e) => e.kind === "EXECUTION_ADMITTED")).toHaveLength(1);
  });

  it("QU4, DB4: bad queue options are refused before anything is recorded", async () => {
    const store = open();
    const flow = flow$("q-bad", async () => 1);
    expect(() => rt(store, { queues: { "": { concurrency: 1 } } })).toThrow(/queue name/);
    expect(() => rt(store, { queues: { a: { concurrency: 0 } } })).toThrow(/concurrency/);
    expect(() =>
      rt(store, { queues: { a: { limit: 2 } as unknown as { concurrency: number } } }),
    ).toThrow(/unknown limits/);
    expect(() => flow$("q-bad2", async () => 1, { queue: { name: "x y" } })).toThrow(/queue name/);
    const r = rt(store, { background: false }).registerFlow(flow);
    await expect(r.start(flow, null, { id: "k1", key: "a" })).rejects.toThrow(/needs a queue/);
    await expect(r.start(flow, null, { id: "k2", queue: "q", priority: 1.5 })).rejects.toThrow(
      /priority/,
    );
    await expect(
      r.start(flow, null, { queue: "q", debounce: { key: "k", ms: -1 } }),
    ).rejects.toThrow(/debounce ms/);
    await expect(r.start(flow, null, { debounce: { key: "k", ms: 5 } })).rejects.toThrow(
      /needs a queue/,
    );
    for (const id of ["k1", "k2"]) expect(await store.head(id)).toBe(-1);
  });
});
