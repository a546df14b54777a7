/**
 * `fanout`: a parent that spawns N children (`ctx.spawn`) and awaits them all (`ctx.awaitChild`),
 * beside a baseline of the same N executions started from outside (`runtime.start`) and awaited
 * by the caller, on a fresh store of the same kind in the same run. Both are timed from the first
 * start to the last result; the peak RSS is sampled every 5 ms during each. A warm-up of both (not
 * counted) runs first.
 *
 * What the ratio shows is what supervision costs per child: the parent's CHILD_STARTED and
 * CHILD_DONE records, the wake row per child end and the parent's wake-ups, against N plain
 * executions.
 */
import { join } from "node:path";
import { createRuntime, flow$, memoryStore, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import type { Store } from "../src/store/spi.ts";
import { choiceFlag, emit, intFlag, note, nowMs, parseFlags, round, withTempDir } from "./lib.ts";

const child = flow$("fanout-child", async (ctx, i: number) => ctx.run("work", () => i * 2));

const parent = flow$("fanout-parent", async (ctx, n: number) => {
  const handles = [];
  for (let i = 0; i < n; i++) handles.push(await ctx.spawn(child, i, { key: "c" }));
  let sum = 0;
  for (const h of handles) sum += await ctx.awaitChild<number>(h);
  return sum;
});

/** Runs `fn`, sampling the RSS; returns its time and the peak RSS in MB. */
async function measured(fn: () => Promise<void>): Promise<{ ms: number; peakRssMb: number }> {
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
  const t0 = nowMs();
  try {
    await fn();
  } finally {
    clearInterval(sampler);
  }
  peak = Math.max(peak, process.memoryUsage().rss);
  return { ms: nowMs() - t0, peakRssMb: peak / (1024 * 1024) };
}

function runtimeOn(store: Store): Runtime {
  return createRuntime({ store, pollIntervalMs: 20 }).registerFlow(child).registerFlow(parent);
}

async function fanout(store: Store, n: number) {
  const runtime = runtimeOn(store);
  try {
    return await measured(async () => {
      const h = await runtime.start(parent, n, { id: "fanout" });
      const out = await h.result();
      if (out.output !== n * (n - 1))
        throw new Error(`fanout summed ${JSON.stringify(out.output)}`);
    });
  } finally {
    await runtime.close();
  }
}

async function baseline(store: Store, n: number) {
  const runtime = runtimeOn(store);
  try {
    return await measured(async () => {
      const handles = [];
      for (let i = 0; i < n; i++) handles.push(await runtime.start(child, i, { id: `c${i}` }));
      let sum = 0;
      for (const h of handles) sum += (await h.result()).output as number;
      if (sum !== n * (n - 1)) throw new Error(`baseline summed ${sum}`);
    });
  } finally {
    await runtime.close();
  }
}

export async function fanoutBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["children", "store"]);
  const n = intFlag(flags, "children", 1000);
  const kind = choiceFlag(flags, "store", ["memory", "sqlite"] as const, "memory");
  await withTempDir(async (dir) => {
    let files = 0;
    const fresh = (): Store =>
      kind === "memory" ? memoryStore() : sqliteStore(join(dir, `fanout-${files++}.db`));
    note(`fanout: warm-up (${Math.min(n, 200)} children)`);
    await fanout(fresh(), Math.min(n, 200));
    await baseline(fresh(), Math.min(n, 200));
    note(`fanout: ${n} children on ${kind}`);
    const base = await baseline(fresh(), n);
    const run = await fanout(fresh(), n);
    emit({
      name: "fanout",
      children: n,
      store: kind,
      totalMs: round(run.ms),
      peakRssMb: round(run.peakRssMb, 1),
      baselineTotalMs: round(base.ms),
      baselinePeakRssMb: round(base.peakRssMb, 1),
      perChildMs: round(run.ms / n, 3),
      ratio: round(run.ms / base.ms),
    });
  });
}
