/**
 * `fleet`: Loom on PostgreSQL (issue 9), each figure beside a raw `pg` baseline from the same run.
 *
 * - stepsPerSec, for 1, 2 and 3 worker processes (test/fixtures/fleet/worker.ts): R rounds of F
 *   flows of 10 steps each, recorded with `drive: false` by this process while the workers are
 *   paused (SIGSTOP), then claimed by them once resumed (SIGCONT); timed from the resume to the
 *   last completion, the best round counted. The machine's CPU time (user + system, all
 *   processes, from /proc/stat) per step is printed beside it: when it is what the cores give,
 *   more workers cannot add throughput.
 * - perStepUs: one sequential durable step (a flow of S steps driven in this process, per step).
 * - startP50Ms / startP99Ms: a one-step flow started and awaited in this process.
 * - baselinePerInsertUs: one INSERT per transaction on the same server, through `pg`: the mean
 *   of a sequential loop, as perStepUs is (stderr also gives its median).
 *
 * Targets: a sequential step costs at most 2 raw inserts; a one-step flow is started and awaited
 * in at most 2 ms at p50; 3 workers give at least 1.5x the steps per second of one.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { cpus } from "node:os";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import pg from "pg";
import { createRuntime, type Runtime } from "../src/index.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import type { Store } from "../src/store/spi.ts";
import { one, quick } from "../test/fixtures/fleet/flows.ts";
import { claimLatency, claimSizesFlag } from "./fleet-claim.ts";
import { FleetCpu, type RoundCpu } from "./fleet-cpu.ts";
import { emit, intFlag, latencyStats, note, nowMs, parseFlags, round, UsageError } from "./lib.ts";

const root = join(import.meta.dirname, "..");

async function withSchema<T>(url: string, fn: (schema: string) => Promise<T>): Promise<T> {
  const schema = `loom_bench_${randomBytes(4).toString("hex")}`;
  try {
    return await fn(schema);
  } finally {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  }
}

/**
 * µs of one INSERT in its own transaction (autocommit), after a warm-up: the mean of a sequential
 * loop (its time over its count, as a sequential step is measured) and the median.
 */
async function rawInsertUs(url: string, n: number): Promise<{ meanUs: number; p50Us: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const table = `loom_bench_raw_${randomBytes(4).toString("hex")}`;
  try {
    await client.query(`CREATE TABLE ${table} (id BIGSERIAL PRIMARY KEY, k TEXT, v TEXT)`);
    const samples: number[] = [];
    for (let i = 0; i < n + 50; i++) {
      const t0 = nowMs();
      await client.query(`INSERT INTO ${table} (k, v) VALUES ($1, $2)`, [`k${i}`, '{"v":1}']);
      if (i >= 50) samples.push(nowMs() - t0);
    }
    const total = samples.reduce((a, b) => a + b, 0);
    return { meanUs: (total * 1000) / samples.length, p50Us: latencyStats(samples).p50Us };
  } finally {
    await client.query(`DROP TABLE IF EXISTS ${table}`);
    await client.end();
  }
}

/** µs per step of one flow of `steps` sequential steps driven here. */
async function perStepUs(store: Store, steps: number): Promise<number> {
  const runtime = createRuntime({ store, closeStore: false }).registerFlow(quick);
  try {
    await (await runtime.start(quick, { steps: 20 }, { id: "warm" })).result();
    const t0 = nowMs();
    await (await runtime.start(quick, { steps }, { id: "seq" })).result();
    return ((nowMs() - t0) * 1000) / steps;
  } finally {
    await runtime.close();
  }
}

async function startLatency(store: Store, n: number) {
  const runtime = createRuntime({ store, closeStore: false }).registerFlow(one);
  try {
    for (let i = 0; i < 20; i++) await (await runtime.start(one, i, { id: `w${i}` })).result();
    const samples: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = nowMs();
      await (await runtime.start(one, i, { id: `s${i}` })).result();
      samples.push(nowMs() - t0);
    }
    return latencyStats(samples);
  } finally {
    await runtime.close();
  }
}

function startWorker(url: string, schema: string, appName: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(root, "test/fixtures/fleet/worker.ts")],
    {
      cwd: root,
      env: { ...process.env, LOOM_PG_URL: url, LOOM_FLEET_SCHEMA: schema, PGAPPNAME: appName },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`a worker exited early (${code})`)));
    child.stdout?.on("data", (d: Buffer) => d.includes("ready") && resolve(child));
  });
}

async function allCompleted(client: Runtime, ids: readonly string[]): Promise<void> {
  for (;;) {
    const done = await client.list({ status: ["completed"], limit: ids.length + 10 });
    if (done.length >= ids.length) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

interface Round {
  stepsPerSec: number;
  cpu: RoundCpu;
  ms: number;
}

/**
 * Steps per second of `workers` processes: the best of `rounds` rounds of `flows` x 10 steps,
 * with the CPU that round cost (fleet-cpu.ts).
 */
async function throughput(url: string, workers: number, flows: number, rounds: number) {
  return withSchema(url, async (schema) => {
    const store = await postgresStore({ connectionString: url, schema });
    const client = createRuntime({ store, background: false, closeStore: false }).registerFlow(
      quick,
    );
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const appName = `loom-fleet-${schema}`;
    const children: ChildProcess[] = [];
    try {
      for (let w = 0; w < workers; w++) children.push(await startWorker(url, schema, appName));
      const cpu = new FleetCpu(
        admin,
        children.map((c) => c.pid ?? 0),
        appName,
      );
      let best: Round | undefined;
      for (let r = 0; r < rounds; r++) {
        const ids = Array.from({ length: flows }, (_, i) => `r${r}-${i}`);
        for (const c of children) c.kill("SIGSTOP");
        await Promise.all(
          ids.map((id) => client.start(quick, { steps: 10 }, { id, drive: false })),
        );
        await cpu.start();
        const t0 = nowMs();
        for (const c of children) c.kill("SIGCONT");
        await allCompleted(client, ids);
        const ms = nowMs() - t0;
        const spent = await cpu.stop();
        const stepsPerSec = (flows * 10 * 1000) / ms;
        if (!best || stepsPerSec > best.stepsPerSec) best = { stepsPerSec, cpu: spent, ms };
        // The round's executions go, so the next round's completion count starts from zero.
        for (const id of ids) await store.deleteExecution(id);
      }
      if (!best) throw new Error("no round ran");
      return best;
    } finally {
      for (const c of children) c.kill("SIGCONT");
      for (const c of children) c.kill("SIGTERM");
      await admin.end();
      await client.close();
      await store.close();
    }
  });
}

/** `--workers 1,2,3`: the worker counts to measure; `0` or `none` skips the throughput rounds. */
function workersFlag(raw: string | undefined): number[] {
  if (raw === undefined) return [1, 2, 3];
  if (raw === "0" || raw === "none") return [];
  const counts = raw.split(",").map(Number);
  if (counts.some((n) => !Number.isSafeInteger(n) || n < 1 || n > 16)) {
    throw new UsageError(`--workers needs integers from 1 to 16, got ${raw}`);
  }
  return counts;
}

export async function fleetBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, [
    "flows",
    "rounds",
    "steps",
    "starts",
    "claim-sizes",
    "claim-samples",
    "workers",
  ]);
  const url = process.env.LOOM_PG_URL;
  if (!url) throw new UsageError("fleet needs LOOM_PG_URL (a PostgreSQL server)");
  const flows = intFlag(flags, "flows", 100);
  const rounds = intFlag(flags, "rounds", 3);
  const steps = intFlag(flags, "steps", 500);
  const starts = intFlag(flags, "starts", 300);
  const claimSizes = claimSizesFlag(flags.get("claim-sizes"));
  const claimSamples = intFlag(flags, "claim-samples", 500);
  const workerCounts = workersFlag(flags.get("workers"));

  const raw = await rawInsertUs(url, 1000);
  const baselinePerInsertUs = round(raw.meanUs, 1);
  note(`fleet: raw insert mean ${baselinePerInsertUs} us, p50 ${raw.p50Us} us`);
  const single = await withSchema(url, async (schema) => {
    const store = await postgresStore({ connectionString: url, schema });
    try {
      const step = await perStepUs(store, steps);
      const start = await startLatency(store, starts);
      return { step, start };
    } finally {
      await store.close();
    }
  });
  note(`fleet: per step ${round(single.step, 1)} us, start p50 ${single.start.p50Us} us`);
  const perWorkers = new Map<number, { stepsPerSec: number; perCore: number }>();
  for (const workers of workerCounts) {
    const { stepsPerSec, cpu, ms } = await throughput(url, workers, flows, rounds);
    const coresBusy = cpu.machineMs / ms;
    const fleetCoresBusy = (cpu.workersMs + cpu.backendsMs) / ms;
    const steps = (stepsPerSec * ms) / 1000;
    const perCore = stepsPerSec / fleetCoresBusy;
    perWorkers.set(workers, { stepsPerSec, perCore });
    emit({
      name: "fleet",
      workers,
      stepsPerSec: round(stepsPerSec, 0),
      coresBusy: round(coresBusy, 2),
      fleetCoresBusy: round(fleetCoresBusy, 2),
      pgSharedCoresBusy: round(cpu.pgSharedMs / ms, 3),
      stepsPerSecPerCore: round(perCore, 0),
      machineStepsPerSecPerCore: round(stepsPerSec / coresBusy, 0),
      workerCpuUsPerStep: round((cpu.workersMs * 1000) / steps, 1),
      pgCpuUsPerStep: round((cpu.backendsMs * 1000) / steps, 1),
      cores: cpus().length,
      perStepUs: round(single.step, 1),
      startP50Ms: round(single.start.p50Us / 1000, 3),
      startP99Ms: round(single.start.p99Us / 1000, 3),
      baselinePerInsertUs,
    });
  }
  const scaling = (perWorkers.get(3)?.stepsPerSec ?? 0) / (perWorkers.get(1)?.stepsPerSec ?? NaN);
  const perCoreRatio = (perWorkers.get(3)?.perCore ?? 0) / (perWorkers.get(1)?.perCore ?? NaN);
  const stepInInserts = single.step / baselinePerInsertUs;
  const claims = await withSchema(url, (schema) =>
    claimLatency(url, schema, claimSizes, claimSamples),
  );
  for (const c of claims) {
    emit({
      name: "fleet-claim",
      executions: c.executions,
      runnable: c.runnable,
      filledBy: "sql",
      fillMs: round(c.fillMs, 0),
      claimP50Ms: round(c.p50Ms, 3),
      claimP99Ms: round(c.p99Ms, 3),
      idleClaimP50Ms: round(c.idleP50Ms, 3),
      idleClaimP99Ms: round(c.idleP99Ms, 3),
      baselinePerInsertUs,
    });
  }
  const claimP99Ms = claims.at(-1)?.p99Ms ?? NaN;
  const idleClaimP99Ms = claims.at(-1)?.idleP99Ms ?? NaN;
  emit({
    name: "fleet",
    summary: true,
    scaling3vs1: round(scaling, 2),
    perCoreRatio3to1: round(perCoreRatio, 2),
    stepInInserts: round(stepInInserts, 2),
    startP50Ms: round(single.start.p50Us / 1000, 3),
    claimSizes: claims.map((c) => c.executions).join(","),
    claimP99Ms: round(claimP99Ms, 3),
    idleClaimP99Ms: round(idleClaimP99Ms, 3),
    target:
      "step <= 2 raw inserts, start p50 <= 2 ms, steps/s per busy core with 3 workers >= 0.85x one, claim p99 (mixed and idle) <= 5 ms at the largest claim size",
    pass:
      stepInInserts <= 2 &&
      single.start.p50Us <= 2000 &&
      perCoreRatio >= 0.85 &&
      (claims.length === 0 || Math.max(claimP99Ms, idleClaimP99Ms) <= 5),
  });
}
