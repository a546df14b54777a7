/**
 * `storage`: the bytes a log takes on each store (issue 23 item 3), beside a raw row of the same
 * payload measured in the same run.
 *
 * - steps: one flow of N sequential steps, each returning a JSON value of about `--bytes` bytes;
 *   bytes per step = what every table of the store grew by once the flow ended, over N (the start
 *   and end amortised). Raw: N rows of (key, payload) in their own transactions, where the key
 *   names the run and the step (`<uuid>/<i>`, as a hand-written durable step's record must) and
 *   the payload is the step's result as JSON.
 * - one-step: F flows started, one step run (the same payload), ended; bytes per flow. Raw: one
 *   row per flow. Beside it, `handWrittenBytesPerOneStepFlow`: the rows a hand-written durable
 *   job of one step writes for the same input and result (storage-handwritten.ts), which store
 *   what the flow must record, where the raw row stores its result only.
 *
 * What counts: every table of the store and its indexes (snapshots, the hot events table, the
 * executions, leases and the rest) as they stand once the flows ended; see storage-bytes.ts for
 * how each engine is measured. The raw tables: SQLite `(key TEXT, payload TEXT)` (a rowid table)
 * on a file with the store's pragmas (WAL, synchronous FULL); PostgreSQL `(id bigserial PRIMARY
 * KEY, key text, payload text)`.
 *
 * Phase lines: `fields` gives an event's logical bytes by field (ids, kind, at, each payload
 * field, meta) and `tables` the bytes by table; the overhead (record headers, index entries, page
 * fill) is the measured total less the fields. Targets: ratio <= 2 on SQLite, <= 1.6 on
 * PostgreSQL, for both figures.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { createRuntime, flow$ } from "../src/index.ts";
import type { Envelope } from "../src/kernel/events.ts";
import type { Json } from "../src/kernel/json.ts";
import { eventCells } from "../src/store/postgres/event-rows.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import type { Store } from "../src/store/spi.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { kindCell, metaCell } from "../src/store/sqlite/row-codec.ts";
import { pgHandWritten, sqliteHandWritten, type HandWrittenJob } from "./storage-handwritten.ts";
import { choiceFlag, emit, intFlag, note, parseFlags, round, withTempDir } from "./lib.ts";
import {
  fieldBytes,
  grown,
  type RowCells,
  meanFields,
  pgTableBytes,
  sqliteTableBytes,
  sumFields,
  total,
  type TableBytes,
} from "./storage-bytes.ts";

/**
 * How many one-step flows the store holds before the long flow is measured: a store holds other
 * executions, whose pages an execution's one row in each table shares. Alone in an empty store
 * (`bytesPerStepAlone`), that row takes a page of each table and of each index to itself.
 */
const PREFILL = 50;

const TARGET = { sqlite: 2, postgres: 1.6 } as const;
type StoreName = keyof typeof TARGET;

/** The step's result: about `bytes` of JSON, different per step. */
function payloadOf(i: number, bytes: number): Json {
  const head = { i, ok: true, text: "" };
  const pad = Math.max(0, bytes - JSON.stringify(head).length);
  return { ...head, text: `r${i}-`.padEnd(pad, "abcdefghijklmnopqrstuvwxyz") };
}

const stepsFlow = flow$("bench-storage", async (ctx, input: { steps: number; bytes: number }) => {
  let n = 0;
  for (let i = 0; i < input.steps; i++) {
    const r = await ctx.run("s", async () => payloadOf(i, input.bytes));
    if (r !== null) n++;
  }
  return { n };
});

const oneStepFlow = flow$("bench-storage-one", async (ctx, input: { i: number; bytes: number }) =>
  ctx.run("s", async () => payloadOf(input.i, input.bytes)),
);

/** One store under test: how to open it and measure its tables. */
interface Target {
  name: StoreName;
  /** How its row holds an event's execution, kind and meta (for the `fields` lines). */
  cells(e: Envelope): RowCells;
  open(label: string): Promise<{ store: Store; bytes: () => Promise<TableBytes> }>;
  raw(rows: readonly { key: string; payload: string }[]): Promise<TableBytes>;
  /** The rows a hand-written durable job of one step writes (storage-handwritten.ts). */
  handWritten(jobs: readonly HandWrittenJob[]): Promise<TableBytes>;
}

interface Run {
  tables: TableBytes;
  logs: Envelope[][];
}

/** Runs `body` on a fresh store; returns what its tables grew by and the logs of `ids`. */
async function measured(
  target: Target,
  label: string,
  body: (rt: ReturnType<typeof createRuntime>) => Promise<string[]>,
  prefill?: (rt: ReturnType<typeof createRuntime>) => Promise<unknown>,
): Promise<Run> {
  const { store, bytes } = await target.open(label);
  const runtime = createRuntime({ store });
  if (prefill) await prefill(runtime);
  const before = await bytes();
  let ids: string[];
  try {
    ids = await body(runtime);
  } finally {
    await runtime.close();
  }
  const { store: again, bytes: after } = await target.open(label);
  try {
    const logs = await Promise.all(ids.map((id) => again.read(id)));
    return { tables: grown(before, await after()), logs };
  } finally {
    await again.close();
  }
}

async function completed(h: { result(): Promise<{ status: string }>; id: string }) {
  const o = await h.result();
  if (o.status !== "completed") throw new Error(`a bench flow ended ${o.status}`);
  return h.id;
}

/** `n` one-step flows run to their end; their ids. */
async function oneStepFlows(rt: ReturnType<typeof createRuntime>, n: number, bytes: number) {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await completed(await rt.start(oneStepFlow, { i, bytes })));
  return ids;
}

const perUnit = (t: TableBytes, n: number): { [k: string]: number } =>
  Object.fromEntries(Object.entries(t).map(([k, v]) => [k, round(v / n, 1)]));

async function storeBench(target: Target, steps: number, flows: number, bytes: number) {
  const name = "storage";
  const store = target.name;
  note(`storage: ${store}: a flow of ${steps} steps, in a store holding ${PREFILL} others`);
  const runSteps = async (rt: ReturnType<typeof createRuntime>) => [
    await completed(await rt.start(stepsFlow, { steps, bytes })),
  ];
  const seq = await measured(target, "steps", runSteps, (rt) => oneStepFlows(rt, PREFILL, bytes));
  note(`storage: ${store}: a flow of ${steps} steps, alone in an empty store`);
  const alone = await measured(target, "steps-alone", runSteps);
  const rawSteps = await target.raw(
    Array.from({ length: steps }, (_, i) => ({
      key: `${randomUUID()}/${i}`,
      payload: JSON.stringify(payloadOf(i, bytes)),
    })),
  );
  note(`storage: ${store}: ${flows} one-step flows`);
  const one = await measured(target, "one", (rt) => oneStepFlows(rt, flows, bytes));
  const rawOne = await target.raw(
    Array.from({ length: flows }, (_, i) => ({
      key: `${randomUUID()}/0`,
      payload: JSON.stringify(payloadOf(i, bytes)),
    })),
  );

  const handWritten = await target.handWritten(
    Array.from({ length: flows }, (_, i) => ({
      id: randomUUID(),
      flow: oneStepFlow.name,
      input: JSON.stringify({ i, bytes }),
      output: JSON.stringify(payloadOf(i, bytes)),
    })),
  );

  const stepEvents = (seq.logs[0] ?? []).filter((e) => e.kind.startsWith("STEP_"));
  const stepFields = meanFields(stepEvents.map((e) => fieldBytes(e, target.cells(e))));
  const perStep = total(seq.tables) / steps;
  emit({ name, phase: "fields", store, flow: "steps", event: "step", bytes: stepFields });
  emit({
    name,
    phase: "tables",
    store,
    flow: "steps",
    bytesPerStep: perUnit(seq.tables, steps),
    overheadPerStep: round(perStep - sumFields(stepFields), 1),
  });
  const firstLog = one.logs[0] ?? [];
  let oneFields = 0;
  for (const e of firstLog) {
    const f = meanFields([fieldBytes(e, target.cells(e))]);
    oneFields += sumFields(f);
    emit({ name, phase: "fields", store, flow: "one-step", event: e.kind, bytes: f });
  }
  const perFlow = total(one.tables) / flows;
  emit({
    name,
    phase: "tables",
    store,
    flow: "one-step",
    bytesPerFlow: perUnit(one.tables, flows),
    overheadPerFlow: round(perFlow - oneFields, 1),
  });
  const rawPerStep = total(rawSteps) / steps;
  const rawPerFlow = total(rawOne) / flows;
  const stepRatio = perStep / rawPerStep;
  const flowRatio = perFlow / rawPerFlow;
  const handPerFlow = total(handWritten) / flows;
  emit({
    name,
    store,
    steps,
    flows,
    payloadBytes: bytes,
    bytesPerStep: round(perStep, 1),
    bytesPerStepAlone: round(total(alone.tables) / steps, 1),
    rawBytesPerStep: round(rawPerStep, 1),
    stepRatio: round(stepRatio),
    bytesPerOneStepFlow: round(perFlow, 1),
    rawBytesPerOneStepFlow: round(rawPerFlow, 1),
    oneStepRatio: round(flowRatio),
    handWrittenBytesPerOneStepFlow: round(handPerFlow, 1),
    oneStepVsHandWritten: round(perFlow / handPerFlow),
    target: TARGET[store],
    passSteps: stepRatio <= TARGET[store],
    passOneStep: flowRatio <= TARGET[store],
    pass: stepRatio <= TARGET[store] && flowRatio <= TARGET[store],
  });
}

function sqliteTarget(dir: string): Target {
  let n = 0;
  return {
    name: "sqlite",
    // Migration 6 (src/store/sqlite/row-codec.ts): a small integer key, a kind code, a bare fence.
    cells: (e) => ({ execution: 1, kind: kindCell(e.kind), meta: metaCell(e.meta) }),
    async open(label) {
      const path = join(dir, `loom-${label}.db`);
      return { store: sqliteStore(path), bytes: async () => sqliteTableBytes(path) };
    },
    async raw(rows) {
      const path = join(dir, `raw-${++n}.db`);
      const db = new Database(path);
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = FULL");
      db.exec("CREATE TABLE raw (key TEXT NOT NULL, payload TEXT NOT NULL)");
      db.close();
      const before = sqliteTableBytes(path);
      const w = new Database(path);
      w.pragma("synchronous = FULL");
      const insert = w.prepare("INSERT INTO raw (key, payload) VALUES (?, ?)");
      const one = w.transaction((r: { key: string; payload: string }) =>
        insert.run(r.key, r.payload),
      );
      for (const r of rows) one.immediate(r);
      w.close();
      return grown(before, sqliteTableBytes(path));
    },
    handWritten: async (jobs) => sqliteHandWritten(dir, `hand-${++n}.db`, jobs),
  };
}

function pgTarget(url: string, client: pg.Client, schemas: string[]): Target {
  const fresh = () => {
    const s = `loom_bench_st_${randomBytes(4).toString("hex")}`;
    schemas.push(s);
    return s;
  };
  const byLabel = new Map<string, string>();
  return {
    name: "postgres",
    // Migration 4 (src/store/postgres/event-rows.ts): a bigint key, a kind code, a bare fence.
    cells: (e) => {
      const c = eventCells(e.kind, e.meta);
      return { execution: 8, kind: c.k ?? c.kn ?? "", meta: c.f ?? c.m };
    },
    async open(label) {
      const schema = byLabel.get(label) ?? fresh();
      byLabel.set(label, schema);
      const store = await postgresStore({ connectionString: url, schema });
      return { store, bytes: () => pgTableBytes(client, schema) };
    },
    async raw(rows) {
      const schema = fresh();
      await client.query(`CREATE SCHEMA "${schema}"`);
      await client.query(
        `CREATE TABLE "${schema}".raw (id bigserial PRIMARY KEY, key text NOT NULL, payload text NOT NULL)`,
      );
      const before = await pgTableBytes(client, schema);
      for (const r of rows) {
        await client.query(`INSERT INTO "${schema}".raw (key, payload) VALUES ($1, $2)`, [
          r.key,
          r.payload,
        ]);
      }
      return grown(before, await pgTableBytes(client, schema));
    },
    handWritten: (jobs) => pgHandWritten(client, fresh(), jobs),
  };
}

export async function storageBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["steps", "flows", "bytes", "store"]);
  const steps = intFlag(flags, "steps", 1000);
  const flows = intFlag(flags, "flows", 200);
  const bytes = intFlag(flags, "bytes", 48);
  const url = process.env.LOOM_PG_URL;
  const which = choiceFlag(flags, "store", ["sqlite", "postgres", "both"], url ? "both" : "sqlite");
  if (which !== "sqlite" && !url) throw new Error("storage --store postgres needs LOOM_PG_URL");
  if (which !== "postgres") {
    await withTempDir((dir) => storeBench(sqliteTarget(dir), steps, flows, bytes));
  }
  if (which === "sqlite" || !url) return;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const schemas: string[] = [];
  try {
    await storeBench(pgTarget(url, client, schemas), steps, flows, bytes);
  } finally {
    for (const s of schemas) await client.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await client.end();
  }
}
