/**
 * `start`: a one-step flow started and awaited (`await (await runtime.start(flow, n)).result()`),
 * beside one raw INSERT in its own transaction on the same kind of store, measured in the same
 * run (issue 23 item 1).
 *
 * Each round takes `--starts` samples of the raw insert, then as many of Loom's start, so both
 * see the same machine; the summary compares the percentiles of all rounds' samples. Beside the
 * latency it counts what the runtime asked of the store per start: commits (the journal's
 * transactions) and reads (store calls that read a log or a head). Targets: ratioP50 <= 2.5,
 * commitsPerStart <= 2.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { createRuntime, flow$ } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import type { Store } from "../src/store/spi.ts";
import {
  choiceFlag,
  emit,
  intFlag,
  latencyStats,
  note,
  nowMs,
  parseFlags,
  round,
  UsageError,
  withTempDir,
} from "./lib.ts";

const oneStep = flow$("bench-start", async (ctx, n: number) => ctx.run("only", () => n + 1));

/** A raw insert's payload: what the one-step flow's step records (its output). */
const rawPayload = (i: number) => JSON.stringify({ callId: "only#0", output: i + 1 });

interface RawInserter {
  insert(i: number): Promise<void> | void;
  close(): Promise<void> | void;
}

function rawSqlite(path: string): RawInserter {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE raw (id INTEGER PRIMARY KEY, k TEXT NOT NULL, v TEXT NOT NULL)");
  const stmt = db.prepare("INSERT INTO raw (k, v) VALUES (?, ?)");
  const one = db.transaction((i: number) => stmt.run(`k${i}`, rawPayload(i)));
  return { insert: (i) => void one.immediate(i), close: () => void db.close() };
}

async function rawPostgres(url: string): Promise<RawInserter> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const table = `loom_bench_raw_${randomBytes(4).toString("hex")}`;
  await client.query(`CREATE TABLE ${table} (id BIGSERIAL PRIMARY KEY, k TEXT, v TEXT)`);
  const text = `INSERT INTO ${table} (k, v) VALUES ($1, $2)`;
  return {
    insert: async (i) =>
      void (await client.query({ name: "raw", text, values: [`k${i}`, rawPayload(i)] })),
    close: async () => {
      await client.query(`DROP TABLE IF EXISTS ${table}`);
      await client.end();
    },
  };
}

/** Counts the store calls that read (a log, a head, a snapshot, a lease) and hands the rest on. */
function countingReads(inner: Store): { store: Store; reads: () => number } {
  let reads = 0;
  const store: Store = {
    ...inner,
    read: (...a) => (reads++, inner.read(...a)),
    head: (...a) => (reads++, inner.head(...a)),
    loadSnapshot: (...a) => (reads++, inner.loadSnapshot(...a)),
    getLease: (...a) => (reads++, inner.getLease(...a)),
  };
  return { store, reads: () => reads };
}

interface Samples {
  raw: number[];
  loom: number[];
  commits: number;
  reads: number;
}

async function measure(
  label: "sqlite" | "postgres",
  rawInserter: RawInserter,
  store: Store,
  starts: number,
  rounds: number,
): Promise<Samples> {
  const counted = countingReads(store);
  const runtime = createRuntime({ store: counted.store });
  const out: Samples = { raw: [], loom: [], commits: 0, reads: 0 };
  try {
    // Warm-up of both (not counted): the JIT, the statements, the connection pool.
    for (let i = 0; i < 50; i++) {
      await rawInserter.insert(-1 - i);
      await (await runtime.start(oneStep, i, { id: `warm-${i}` })).result();
    }
    let n = 0;
    for (let r = 1; r <= rounds; r++) {
      note(`start (${label}): round ${r} of ${rounds}`);
      for (let i = 0; i < starts; i++) {
        const t0 = nowMs();
        await rawInserter.insert(n + i);
        out.raw.push(nowMs() - t0);
      }
      const commits0 = runtime.journal.commits;
      const reads0 = counted.reads();
      for (let i = 0; i < starts; i++, n++) {
        const t0 = nowMs();
        const outcome = await (await runtime.start(oneStep, n, { id: `s-${n}` })).result();
        out.loom.push(nowMs() - t0);
        if (outcome.status !== "completed")
          throw new Error(`a bench start ended ${outcome.status}`);
      }
      out.commits += runtime.journal.commits - commits0;
      out.reads += counted.reads() - reads0;
      const raw = latencyStats(out.raw.slice(-starts));
      const loom = latencyStats(out.loom.slice(-starts));
      emit({
        name: "start",
        phase: "round",
        store: label,
        round: r,
        p50Ms: round(loom.p50Us / 1000, 3),
        rawInsertP50Ms: round(raw.p50Us / 1000, 3),
      });
    }
    return out;
  } finally {
    await runtime.close();
    await rawInserter.close();
  }
}

function summary(label: "sqlite" | "postgres", s: Samples, starts: number, rounds: number): void {
  const loom = latencyStats(s.loom);
  const raw = latencyStats(s.raw);
  const total = starts * rounds;
  const ratioP50 = loom.p50Us / raw.p50Us;
  const commitsPerStart = s.commits / total;
  emit({
    name: "start",
    store: label,
    starts: total,
    p50Ms: round(loom.p50Us / 1000, 3),
    p99Ms: round(loom.p99Us / 1000, 3),
    rawInsertP50Ms: round(raw.p50Us / 1000, 3),
    rawInsertP99Ms: round(raw.p99Us / 1000, 3),
    ratioP50: round(ratioP50),
    commitsPerStart: round(commitsPerStart, 3),
    readsPerStart: round(s.reads / total, 3),
    target: "ratioP50 <= 2.5, commitsPerStart <= 2",
    pass: ratioP50 <= 2.5 && commitsPerStart <= 2,
  });
}

export async function startBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["starts", "rounds", "store"]);
  const starts = intFlag(flags, "starts", 200);
  const rounds = intFlag(flags, "rounds", 3);
  const url = process.env.LOOM_PG_URL;
  const which = choiceFlag(
    flags,
    "store",
    ["sqlite", "postgres", "both"] as const,
    url ? "both" : "sqlite",
  );
  if (which !== "sqlite" && !url) throw new UsageError("--store postgres needs LOOM_PG_URL");
  if (which !== "postgres") {
    await withTempDir(async (dir) => {
      const raw = rawSqlite(join(dir, "raw.db"));
      const store = sqliteStore(join(dir, "loom.db"));
      summary("sqlite", await measure("sqlite", raw, store, starts, rounds), starts, rounds);
    });
  }
  if (which !== "sqlite" && url) {
    const schema = `loom_bench_${randomBytes(4).toString("hex")}`;
    try {
      const store = await postgresStore({ connectionString: url, schema });
      const raw = await rawPostgres(url);
      summary("postgres", await measure("postgres", raw, store, starts, rounds), starts, rounds);
    } finally {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    }
  }
}
