/**
 * `steps --store postgres`: the cost of a sequential durable step on PostgreSQL (issue 23 item 2).
 *
 * steps-seq  one flow of N sequential ctx.run steps on a fresh store, timed from start() to
 *            result(), per step (the mean: the time over the count), beside N raw INSERTs of a
 *            row shaped as an events row and as large as a step's (its execution id, kind,
 *            payload and meta copied from a step event Loom wrote in the warm-up), each in its
 *            own transaction (autocommit) through one `pg` client: its time over its count.
 *            Target: perStepUs / baselinePerStepUs <= 2.
 *
 * S1. Every round makes a fresh random schema for Loom and another for the raw table, and drops
 *     both when it ends, also on error: rounds never see each other's rows.
 * S2. The machine is shared, so the figure and its baseline alternate for `--rounds` rounds and
 *     their medians are compared; CPU time of this process is reported beside wall time (the
 *     server's is not: it runs in other processes).
 * S3. A warm-up of both (not counted) runs first, for the JIT and the server's caches.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { createRuntime, flow$ } from "../src/index.ts";
import {
  EVENT_ROW_COLUMNS,
  envelopeOfPgRow,
  type PgEventRow,
} from "../src/store/postgres/event-rows.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { countingStore, cpuMs, emit, median, note, nowMs, round, UsageError } from "./lib.ts";

const stepsFlow = flow$("bench-steps", async (ctx, input: { steps: number }) => {
  let sum = 0;
  for (let i = 0; i < input.steps; i++) sum += await ctx.run("s", async () => i);
  return { sum };
});

/** A row of the events table as a step writes it: what the raw baseline inserts. */
interface SampleRow {
  executionId: string;
  kind: string;
  payload: string;
  meta: string | null;
}

interface PerStep {
  perStepUs: number;
  cpuPerStepUs: number;
}

interface LoomRun extends PerStep {
  appendUs: number;
  restUs: number;
  eventsPerStep: number;
  sample: SampleRow | undefined;
}

/** S1: a fresh schema name, dropped after `fn` whatever it did. */
async function withSchema<T>(url: string, fn: (schema: string) => Promise<T>): Promise<T> {
  const schema = `loom_bench_${randomBytes(4).toString("hex")}`;
  try {
    return await fn(schema);
  } finally {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await client.end();
    }
  }
}

/** One flow of `steps` sequential steps on a fresh store; a step's event row read back. */
async function loomSteps(url: string, steps: number): Promise<LoomRun> {
  return withSchema(url, async (schema) => {
    const { store, counts } = countingStore(
      await postgresStore({ connectionString: url, schema }),
      { untilSettled: true },
    );
    const runtime = createRuntime({ store });
    let sample: SampleRow | undefined;
    let ms: number;
    let cpu: number;
    try {
      const t0 = nowMs();
      const c0 = cpuMs();
      const handle = await runtime.start(stepsFlow, { steps });
      const outcome = await handle.result();
      ms = nowMs() - t0;
      cpu = cpuMs() - c0;
      if (outcome.status !== "completed") {
        throw new Error(`the bench flow ended ${outcome.status}: ${JSON.stringify(outcome.error)}`);
      }
      sample = await stepRow(url, schema, handle.id);
    } finally {
      await runtime.close();
    }
    return {
      perStepUs: (ms * 1000) / steps,
      cpuPerStepUs: (cpu * 1000) / steps,
      appendUs: (counts.appendMs * 1000) / steps,
      restUs: ((ms - counts.appendMs) * 1000) / steps,
      eventsPerStep: counts.events / steps,
      sample,
    };
  });
}

/** The event row of a step in the middle of the log: the shape and size the baseline copies. */
async function stepRow(url: string, schema: string, id: string): Promise<SampleRow | undefined> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // Read back as text (event-rows.ts E1..E3): the baseline's row holds the kind and meta so.
    const ofExecution = `x = (SELECT n FROM "${schema}".executions WHERE id = $1)`;
    const { rows } = await client.query<PgEventRow>(
      `SELECT ${EVENT_ROW_COLUMNS} FROM "${schema}".events
       WHERE ${ofExecution} ORDER BY seq OFFSET (SELECT count(*) / 2 FROM "${schema}".events
       WHERE ${ofExecution}) LIMIT 1`,
      [id],
    );
    const row = rows[0];
    if (!row) return undefined;
    const e = envelopeOfPgRow(id, row);
    const meta = e.meta === undefined ? null : JSON.stringify(e.meta);
    return { executionId: id, kind: e.kind, payload: row.payload, meta };
  } finally {
    await client.end();
  }
}

/** `n` INSERTs of `row` in a table shaped as the events table, one per transaction (S1). */
async function rawInserts(url: string, n: number, row: SampleRow): Promise<PerStep> {
  return withSchema(url, async (schema) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(`CREATE SCHEMA "${schema}"`);
      await client.query(`CREATE TABLE "${schema}".events (
        execution_id TEXT COLLATE "C" NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL,
        at BIGINT NOT NULL, payload TEXT NOT NULL, meta TEXT, PRIMARY KEY (execution_id, seq))`);
      const text = `INSERT INTO "${schema}".events (execution_id, seq, kind, at, payload, meta)
        VALUES ($1, $2, $3, $4, $5, $6)`;
      const at = Date.now();
      const t0 = nowMs();
      const c0 = cpuMs();
      for (let i = 0; i < n; i++) {
        await client.query(text, [row.executionId, i, row.kind, at + i, row.payload, row.meta]);
      }
      const ms = nowMs() - t0;
      return { perStepUs: (ms * 1000) / n, cpuPerStepUs: ((cpuMs() - c0) * 1000) / n };
    } finally {
      await client.end();
    }
  });
}

const bytesOf = (row: SampleRow) =>
  Buffer.byteLength(row.executionId) +
  Buffer.byteLength(row.kind) +
  Buffer.byteLength(row.payload) +
  Buffer.byteLength(row.meta ?? "") +
  16;

export async function stepsPgBench(steps: number, rounds: number): Promise<void> {
  const url = process.env["LOOM_PG_URL"];
  if (!url) throw new UsageError("steps --store postgres needs LOOM_PG_URL");
  const name = "steps-seq";
  note("warm-up (postgres)");
  // S3
  const warm = await loomSteps(url, 200);
  const row = warm.sample;
  if (!row) throw new Error("the warm-up wrote no step event to copy");
  await rawInserts(url, 200, row);
  emit({
    name: "steps",
    phase: "warm-up",
    store: "postgres",
    counted: false,
    rowBytes: bytesOf(row),
  });
  const loom: LoomRun[] = [];
  const base: PerStep[] = [];
  for (let r = 1; r <= rounds; r++) {
    note(`${name} (postgres): round ${r} of ${rounds}`);
    const b = await rawInserts(url, steps, row);
    base.push(b);
    emit({
      name,
      store: "postgres",
      phase: "baseline",
      round: r,
      rows: steps,
      ...roundAll({ ...b }),
    });
    const l = await loomSteps(url, steps);
    loom.push(l);
    const { sample: _, ...figures } = l;
    emit({ name, store: "postgres", phase: "loom", round: r, steps, ...roundAll(figures) });
  }
  const perStepUs = median(loom.map((x) => x.perStepUs));
  const baselinePerStepUs = median(base.map((x) => x.perStepUs));
  const ratio = perStepUs / baselinePerStepUs;
  const cpuPerStepUs = median(loom.map((x) => x.cpuPerStepUs));
  const baselineCpuPerStepUs = median(base.map((x) => x.cpuPerStepUs));
  emit({
    name,
    store: "postgres",
    steps,
    rounds,
    rowBytes: bytesOf(row),
    perStepUs: round(perStepUs),
    baselinePerStepUs: round(baselinePerStepUs),
    ratio: round(ratio),
    cpuPerStepUs: round(cpuPerStepUs),
    baselineCpuPerStepUs: round(baselineCpuPerStepUs),
    appendUs: round(median(loom.map((x) => x.appendUs))),
    restUs: round(median(loom.map((x) => x.restUs))),
    eventsPerStep: round(median(loom.map((x) => x.eventsPerStep)), 3),
    target: "ratio <= 2",
    pass: ratio <= 2,
  });
}

function roundAll(x: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, round(v)]));
}
