/**
 * Issue 23 item 1: a start, its first step and its end take the fewest commits the guarantees
 * allow, and no read on a fresh id.
 *
 * - Two commits for a one-step flow: the start (durable before the step's code runs), then the
 *   step's result with the end, in one batch, when the body returns right after it.
 * - R1 (run.ts): a step's result is the body's once queued, but the next step's code runs only
 *   once that result is committed; and if its commit fails, nothing the body does next reaches
 *   outside: the re-run recovers the execution and runs each later step once.
 * - W5: a repeat start of a known id still adopts it (the write is refused, then the log read).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  memoryStore,
  type AppendBatch,
  type Runtime,
  type Store,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { slow } from "./support/slowdown.ts";

const open: Runtime[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "loom-start-commits-"));
  dirs.push(dir);
  return dir;
}

/** A store whose appendMany calls (their batches' event kinds) and reads are recorded. */
function recording(inner: Store) {
  const commits: string[][] = [];
  let reads = 0;
  const store: Store = {
    ...inner,
    appendMany: (batches: readonly AppendBatch[]) => {
      commits.push(batches.flatMap((b) => b.events.map((e) => `${b.executionId}:${e.kind}`)));
      return inner.appendMany(batches);
    },
    read: (...a) => (reads++, inner.read(...a)),
    head: (...a) => (reads++, inner.head(...a)),
    loadSnapshot: (...a) => (reads++, inner.loadSnapshot(...a)),
  };
  return { store, commits, reads: () => reads };
}

const oneStep = flow$("one-step-commits", async (ctx, n: number) => ctx.run("only", () => n + 1));

describe("a one-step flow started and awaited (issue 23 item 1)", () => {
  for (const kind of ["memory", "sqlite"] as const) {
    it(`takes two commits and no read on ${kind}: the start, then the step's result with the end`, async () => {
      const inner = kind === "memory" ? memoryStore() : sqliteStore(join(tempDir(), "c.db"));
      const { store, commits, reads } = recording(inner);
      const r = createRuntime({ store, pollIntervalMs: 60_000 });
      open.push(r);
      r.registerFlow(oneStep);
      // The background loop's first tick (made by registering) runs before counting.
      await new Promise((res) => setTimeout(res, 50));
      const reads0 = reads();
      commits.length = 0;
      const outcome = await (await r.start(oneStep, 1, { id: "fresh" })).result();
      expect(outcome).toMatchObject({ status: "completed", output: 2 });
      expect(commits).toEqual([
        ["fresh:EXECUTION_STARTED"],
        ["fresh:STEP_COMPLETED", "fresh:EXECUTION_COMPLETED"],
      ]);
      expect(reads() - reads0).toBe(0);
    });
  }

  it("a repeat start of the same id adopts it (W5): its write is refused, nothing is lost", async () => {
    const { store, commits } = recording(memoryStore());
    const r = createRuntime({ store, pollIntervalMs: 60_000 });
    open.push(r);
    const first = await (await r.start(oneStep, 1, { id: "same" })).result();
    const again = await (await r.start(oneStep, 1, { id: "same" })).result();
    expect(again).toEqual(first);
    // Another runtime (nothing of it in memory) adopts it too.
    const other = createRuntime({ store, pollIntervalMs: 60_000 });
    open.push(other);
    expect(await (await other.start(oneStep, 1, { id: "same" })).result()).toEqual(first);
    await expect(other.start(oneStep, 2, { id: "same" })).rejects.toMatchObject({
      code: "LOOM_EXECUTION_CONFLICT",
    });
    const log = await store.read("same");
    expect(log.map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "STEP_COMPLETED",
      "EXECUTION_COMPLETED",
    ]);
    expect(commits.flat().filter((k) => k === "same:EXECUTION_STARTED").length).toBeGreaterThan(1);
  });
});

describe("R1: a step's code runs only on committed facts", () => {
  it("the second step's code sees the first step's result in the store", async () => {
    const inner = memoryStore();
    // Each commit takes a while: the body, given the first result at once, reaches the second
    // step long before that result is durable.
    const store: Store = {
      ...inner,
      appendMany: async (batches) => {
        await new Promise((res) => setTimeout(res, 20));
        return inner.appendMany(batches);
      },
    };
    const seen: string[][] = [];
    const twoSteps = flow$("two-steps-r1", async (ctx) => {
      const a = await ctx.run("a", () => 1);
      const b = await ctx.run("b", async () => {
        seen.push((await inner.read(ctx.executionId)).map((e) => e.kind));
        return 2;
      });
      return a + b;
    });
    const r = createRuntime({ store, pollIntervalMs: 60_000 });
    open.push(r);
    const outcome = await (await r.start(twoSteps, null, { id: "r1" })).result();
    expect(outcome).toMatchObject({ status: "completed", output: 3 });
    expect(seen).toEqual([["EXECUTION_STARTED", "STEP_COMPLETED"]]);
  });

  it("a step whose result never commits lets no later step run; the re-run runs each once", async () => {
    const inner = memoryStore();
    let failNext = true;
    // The commit holding step a's result fails once (a store error): that run stops.
    const store: Store = {
      ...inner,
      appendMany: async (batches) => {
        const holdsA = batches.some((b) =>
          b.events.some(
            (e) => e.kind === "STEP_COMPLETED" && JSON.stringify(e.payload).includes('"a#0"'),
          ),
        );
        if (holdsA && failNext) {
          failNext = false;
          throw new Error("disk went away");
        }
        return inner.appendMany(batches);
      },
    };
    const ran = { a: 0, b: 0, after: 0 };
    const flow = flow$("lost-commit", async (ctx) => {
      const a = await ctx.run("a", () => ++ran.a);
      const b = await ctx.run("b", () => ++ran.b);
      ran.after++;
      return a + b;
    });
    const r = createRuntime({ store, leaseTtlMs: 200, pollIntervalMs: 20 });
    open.push(r);
    const handle = await r.start(flow, null, { id: "lost" });
    const outcome = await r.waitForCompletion("lost", { timeoutMs: slow(10_000) });
    expect(handle.id).toBe("lost");
    expect(outcome).toMatchObject({ status: "completed" });
    // a ran twice (its first result was lost), b once, on the recovered run only.
    expect(ran).toEqual({ a: 2, b: 1, after: 1 });
    const kinds = (await inner.read("lost")).map((e) => e.kind);
    expect(kinds.filter((k) => k === "STEP_COMPLETED")).toHaveLength(2);
    expect(kinds.at(-1)).toBe("EXECUTION_COMPLETED");
  });
});
