/**
 * `npm run bench -- cancel [--runs 50]`: how long a cancel takes to reach a running effect, from
 * the `runtime.cancel` call to the moment the effect's signal aborts (ADR 0020: a 10-minute step
 * is cancelled in under 1 s).
 *
 * - in-process: the runtime that drives the execution cancels it (one append, then the abort);
 * - cross-process: a second OS process on the same SQLite file cancels it; the owner learns of it
 *   through its notice poll (50 ms by default).
 *
 * Each mode's line carries its baseline, measured in the same run: the p50 of one `resume`
 * append on the same SQLite file, the floor cost of writing one fact. Targets: p99 ≤ 10 ms
 * in-process, ≤ 100 ms cross-process.
 *
 * Then cancel-stream.ts's lines: from the cancel to the provider's closed connection, for a
 * streaming call through loomwork/ai-sdk beside Loom's native effect, in both modes.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { createRuntime, flow$, step$ } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { cancelStreamBench } from "./cancel-stream.ts";
import { emit, intFlag, note, parseFlags, round, withTempDir } from "./lib.ts";

const wallNow = () => performance.timeOrigin + performance.now();

function percentile(samples: readonly number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

/** p50 of one resume append (the baseline), on its own runtime over `db`. */
async function appendBaselineMs(db: string, runs: number): Promise<number> {
  const waits = flow$("bench-waits", async (ctx) => {
    for (;;) await ctx.suspend();
  });
  const runtime = createRuntime({ store: sqliteStore(db) });
  runtime.registerFlow(waits);
  const h = await runtime.start(waits, null, { id: "baseline" });
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await runtime.resume(h.id, i);
    samples.push(performance.now() - t0);
  }
  await runtime.close();
  return percentile(samples, 0.5);
}

async function inProcess(db: string, runs: number): Promise<number[]> {
  let running: (() => void) | undefined;
  let aborted: ((at: number) => void) | undefined;
  const wait = step$("wait", async (_: null, { signal }) => {
    running?.();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 600_000);
      signal.addEventListener("abort", () => {
        aborted?.(performance.now());
        clearTimeout(timer);
        reject(new Error("aborted"));
      });
    });
  });
  const long = flow$("bench-cancel", async (ctx) => ctx.execute(wait, null));
  const runtime = createRuntime({ store: sqliteStore(db) });
  runtime.registerFlow(long);
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const isRunning = new Promise<void>((r) => (running = r));
    const abortedAt = new Promise<number>((r) => (aborted = r));
    const h = await runtime.start(long, null, { id: `in-${i}` });
    await isRunning;
    const t0 = performance.now();
    await runtime.cancel(h.id, "bench");
    samples.push((await abortedAt) - t0);
    await h.result();
  }
  await runtime.close();
  return samples;
}

async function crossProcess(db: string, runs: number): Promise<number[]> {
  const owner = spawn(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "cancel-owner.ts"), db],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const waiting = new Map<string, (at: number) => void>();
  createInterface({ input: owner.stdout }).on("line", (line) => {
    const m = JSON.parse(line) as { event: string; id?: string; at: number };
    waiting.get(`${m.event}:${m.id ?? ""}`)?.(m.at);
  });
  const next = (event: string, id = "") =>
    new Promise<number>((r) => waiting.set(`${event}:${id}`, r));
  await next("ready");
  const runtime = createRuntime({ store: sqliteStore(db), background: false });
  const samples: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const id = `cross-${i}`;
      const running = next("running", id);
      owner.stdin.write(`${id}\n`);
      await running;
      // The step's start is written at the owner's next group commit: wait until it is durable.
      while ((await runtime.getState(id)).inFlight === 0)
        await new Promise((r) => setTimeout(r, 1));
      const abortedAt = next("aborted", id);
      const t0 = wallNow();
      await runtime.cancel(id, "bench");
      samples.push((await abortedAt) - t0);
    }
  } finally {
    owner.stdin.write("exit\n");
    await runtime.close();
  }
  return samples;
}

export async function cancelBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["runs"]);
  const runs = intFlag(flags, "runs", 50);
  await withTempDir(async (dir) => {
    const db = join(dir, "loom.db");
    note(`cancel: ${runs} runs in each mode`);
    const baselineMs = await appendBaselineMs(db, runs);
    for (const mode of ["in-process", "cross-process"] as const) {
      const samples =
        mode === "in-process" ? await inProcess(db, runs) : await crossProcess(db, runs);
      const p99Ms = percentile(samples, 0.99);
      const target = mode === "in-process" ? 10 : 100;
      emit({
        name: "cancel",
        mode,
        runs,
        p50Ms: round(percentile(samples, 0.5)),
        p99Ms: round(p99Ms),
        maxMs: round(percentile(samples, 1)),
        baselineAppendP50Ms: round(baselineMs),
        target: `p99Ms <= ${target}`,
        pass: p99Ms <= target,
      });
    }
    await cancelStreamBench(db, runs);
  });
}
