/**
 * `steps`: the cost of a durable step on SQLite (on PostgreSQL with `--store postgres`:
 * steps-pg.ts, steps-seq only).
 *
 * steps-seq        one flow of N sequential ctx.run steps, timed from start() to result(), beside
 *                  a raw better-sqlite3 loop of one row per transaction on a fresh file with the
 *                  same pragmas. Target: perStepUs / baselinePerStepUs <= 2.
 * steps-concurrent E executions of S steps each started at once on one runtime, beside the same
 *                  flow run alone, one execution after another (>= 1000 steps). Target:
 *                  stepsPerSec / seqStepsPerSec >= 5 (what group commit buys).
 *
 * The machine is shared, so each figure and its baseline are measured in alternation for
 * `--rounds` rounds and the medians compared; CPU time (less sensitive to neighbours than wall
 * time) is reported beside wall time. A warm-up of both (not counted) runs first for the JIT.
 */
import { join } from "node:path";
import { createRuntime, flow$ } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import {
  choiceFlag,
  countingStore,
  cpuMs,
  emit,
  intFlag,
  median,
  note,
  nowMs,
  parseFlags,
  round,
  withTempDir,
  UsageError,
  type StoreCounts,
} from "./lib.ts";
import { stepsPgBench } from "./steps-pg.ts";
import { rawSqliteLoop, type Synchronous } from "./raw-sqlite.ts";

const stepsFlow = flow$("bench-steps", async (ctx, input: { steps: number }) => {
  let sum = 0;
  for (let i = 0; i < input.steps; i++) sum += await ctx.run("s", async () => i);
  return { sum };
});

interface Measured {
  ms: number;
  cpuMs: number;
  steps: number;
  commits: number;
  counts: StoreCounts;
}

/**
 * On a fresh runtime and file: `waves` times, start `executions` flows of `steps` steps at once
 * and wait for all of them. Timed from the first start() to the last result().
 */
async function runWaves(
  path: string,
  sync: Synchronous,
  waves: number,
  executions: number,
  steps: number,
): Promise<Measured> {
  const { store, counts } = countingStore(sqliteStore(path, { synchronous: sync }));
  const runtime = createRuntime({ store });
  try {
    let ms = 0;
    let cpu = 0;
    for (let w = 0; w < waves; w++) {
      const t0 = nowMs();
      const c0 = cpuMs();
      const handles = await Promise.all(
        Array.from({ length: executions }, () => runtime.start(stepsFlow, { steps })),
      );
      const outcomes = await Promise.all(handles.map((h) => h.result()));
      ms += nowMs() - t0;
      cpu += cpuMs() - c0;
      const bad = outcomes.find((o) => o.status !== "completed");
      if (bad) throw new Error(`a bench flow ended ${bad.status}: ${JSON.stringify(bad.error)}`);
    }
    const commits = runtime.journal.commits;
    return { ms, cpuMs: cpu, steps: waves * executions * steps, commits, counts: { ...counts } };
  } finally {
    await runtime.close();
  }
}

const perStep = (m: { ms: number; cpuMs: number; steps: number }) => ({
  perStepUs: (m.ms * 1000) / m.steps,
  cpuPerStepUs: (m.cpuMs * 1000) / m.steps,
});

/** Where a step's wall time went: in appendMany, snapshots, leases, and the rest (the runtime). */
function breakdown(m: Measured) {
  const us = (ms: number) => (ms * 1000) / m.steps;
  const { appendMs, snapshotMs, leaseMs } = m.counts;
  return {
    appendUs: us(appendMs),
    snapshotUs: us(snapshotMs),
    leaseUs: us(leaseMs),
    restUs: us(m.ms - appendMs - snapshotMs - leaseMs),
  };
}

async function stepsSeq(ctx: Ctx, steps: number): Promise<void> {
  const name = "steps-seq";
  const loom: ReturnType<typeof perStep>[] = [];
  const parts: ReturnType<typeof breakdown>[] = [];
  const base: ReturnType<typeof perStep>[] = [];
  let last: Measured | undefined;
  for (let r = 1; r <= ctx.rounds; r++) {
    note(`${name}: round ${r} of ${ctx.rounds}`);
    const raw = rawSqliteLoop(ctx.file(), steps, ctx.sync);
    const b = perStep({ ms: raw.totalMs, cpuMs: raw.cpuMs, steps });
    base.push(b);
    emit({ name, phase: "baseline", round: r, rows: steps, ...rounded(b) });
    last = await runWaves(ctx.file(), ctx.sync, 1, 1, steps);
    const l = perStep(last);
    loom.push(l);
    const split = breakdown(last);
    parts.push(split);
    emit({ name, phase: "loom", round: r, steps, ...rounded(l), ...roundAll(split) });
  }
  const perStepUs = median(loom.map((x) => x.perStepUs));
  const baselinePerStepUs = median(base.map((x) => x.perStepUs));
  const ratio = perStepUs / baselinePerStepUs;
  const cpuPerStepUs = median(loom.map((x) => x.cpuPerStepUs));
  const baselineCpuPerStepUs = median(base.map((x) => x.cpuPerStepUs));
  emit({
    name,
    store: "sqlite",
    synchronous: ctx.sync,
    steps,
    rounds: ctx.rounds,
    perStepUs: round(perStepUs),
    baselinePerStepUs: round(baselinePerStepUs),
    ratio: round(ratio),
    cpuPerStepUs: round(cpuPerStepUs),
    baselineCpuPerStepUs: round(baselineCpuPerStepUs),
    cpuRatio: round(cpuPerStepUs / baselineCpuPerStepUs),
    ...roundAll({
      appendUs: median(parts.map((p) => p.appendUs)),
      snapshotUs: median(parts.map((p) => p.snapshotUs)),
      restUs: median(parts.map((p) => p.restUs)),
    }),
    commitsPerStep: last ? round(last.commits / steps, 3) : null,
    eventsPerCommit: last ? round(last.counts.events / last.commits) : null,
    target: "ratio <= 2",
    pass: ratio <= 2,
  });
}

async function stepsConcurrent(ctx: Ctx, executions: number, stepsEach: number): Promise<void> {
  const name = "steps-concurrent";
  const waves = Math.ceil(1000 / stepsEach);
  const seqRates: number[] = [];
  const rates: number[] = [];
  let last: Measured | undefined;
  const rate = (m: Measured) => m.steps / (m.ms / 1000);
  for (let r = 1; r <= ctx.rounds; r++) {
    note(`${name}: round ${r} of ${ctx.rounds}`);
    const s = await runWaves(ctx.file(), ctx.sync, waves, 1, stepsEach);
    seqRates.push(rate(s));
    emit({
      name,
      phase: "sequential",
      round: r,
      executions: waves,
      stepsEach,
      stepsPerSec: round(rate(s), 0),
      cpuPerStepUs: round((s.cpuMs * 1000) / s.steps),
      commits: s.commits,
    });
    last = await runWaves(ctx.file(), ctx.sync, 1, executions, stepsEach);
    rates.push(rate(last));
    emit({
      name,
      phase: "concurrent",
      round: r,
      executions,
      stepsEach,
      stepsPerSec: round(rate(last), 0),
      cpuPerStepUs: round((last.cpuMs * 1000) / last.steps),
      commits: last.commits,
      events: last.counts.events,
      leaseAcquires: last.counts.acquires,
      ...roundAll(breakdown(last)),
    });
  }
  const stepsPerSec = median(rates);
  const seqStepsPerSec = median(seqRates);
  const ratio = stepsPerSec / seqStepsPerSec;
  emit({
    name,
    store: "sqlite",
    synchronous: ctx.sync,
    executions,
    stepsEach,
    rounds: ctx.rounds,
    stepsPerSec: round(stepsPerSec, 0),
    seqStepsPerSec: round(seqStepsPerSec, 0),
    ratio: round(ratio),
    commits: last?.commits ?? null,
    eventsPerCommit: last ? round(last.counts.events / last.commits) : null,
    target: "ratio >= 5",
    pass: ratio >= 5,
  });
}

function rounded(x: ReturnType<typeof perStep>) {
  return { perStepUs: round(x.perStepUs), cpuPerStepUs: round(x.cpuPerStepUs) };
}

function roundAll(x: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, round(v)]));
}

interface Ctx {
  sync: Synchronous;
  rounds: number;
  file(): string;
}

export async function stepsBench(argv: readonly string[]): Promise<void> {
  const known = ["steps", "executions", "steps-each", "synchronous", "rounds", "only", "store"];
  const flags = parseFlags(argv, known);
  const steps = intFlag(flags, "steps", 1000);
  const executions = intFlag(flags, "executions", 100);
  const stepsEach = intFlag(flags, "steps-each", 100);
  const sync = choiceFlag(flags, "synchronous", ["FULL", "NORMAL"] as const, "FULL");
  const rounds = intFlag(flags, "rounds", 5);
  const only = choiceFlag(flags, "only", ["seq", "concurrent", "both"] as const, "both");
  const store = choiceFlag(flags, "store", ["sqlite", "postgres"] as const, "sqlite");
  if (store === "postgres") {
    if (only === "concurrent") throw new UsageError("steps --store postgres measures seq only");
    await stepsPgBench(steps, rounds);
    return;
  }
  await withTempDir(async (dir) => {
    let n = 0;
    const ctx: Ctx = { sync, rounds, file: () => join(dir, `bench-${n++}.db`) };
    note(`warm-up (synchronous ${sync})`);
    const t0 = nowMs();
    rawSqliteLoop(ctx.file(), 200, sync);
    await runWaves(ctx.file(), sync, 2, 1, 100);
    await runWaves(ctx.file(), sync, 1, 10, 20);
    emit({ name: "steps", phase: "warm-up", counted: false, totalMs: round(nowMs() - t0) });
    if (only !== "concurrent") await stepsSeq(ctx, steps);
    if (only !== "seq") await stepsConcurrent(ctx, executions, stepsEach);
  });
}
