/**
 * `bench storage`'s second baseline for a one-step flow: the rows a hand-written durable job of
 * one step writes, on the same engine, in the same run. The first baseline (one raw row holding
 * the step's result) stores a third of what the flow must record; this one stores the same facts:
 *
 * - a `runs` row per job, found by its id (primary key) and by its status (an index: a worker must
 *   find the jobs left running by a crash), holding the flow's name, its input and, once it ended,
 *   its status and output;
 * - a `steps` row per step, keyed by (run id, step name), holding the step's result, written in
 *   the same transaction as the run's end, as a one-step flow's last batch is.
 *
 * Two transactions per job (the run's row, then the step's row and the run's end), which is what a
 * start and its end cost in Loom (docs/benchmarks.md, "start"). No lease, no history, no
 * fingerprint: what Loom keeps beyond this is what replay, fencing and audit need.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import type pg from "pg";
import { grown, pgTableBytes, sqliteTableBytes, type TableBytes } from "./storage-bytes.ts";

/** One job: its id, flow name, input and the step's result (both as JSON text). */
export interface HandWrittenJob {
  id: string;
  flow: string;
  input: string;
  output: string;
}

const SCHEMA = (runs: string, steps: string, index: string) => [
  `CREATE TABLE ${runs} (id TEXT PRIMARY KEY, flow TEXT NOT NULL, status TEXT NOT NULL,
     input TEXT NOT NULL, output TEXT)`,
  `CREATE INDEX ${index} ON ${runs} (status)`,
  `CREATE TABLE ${steps} (run_id TEXT NOT NULL, step TEXT NOT NULL, output TEXT NOT NULL,
     PRIMARY KEY (run_id, step))`,
];

/** SQLite: the jobs written to a fresh file at `dir`/`name` with the store's pragmas. */
export function sqliteHandWritten(dir: string, name: string, jobs: readonly HandWrittenJob[]) {
  const path = join(dir, name);
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  for (const sql of SCHEMA("runs", "steps", "runs_by_status")) db.exec(sql);
  db.close();
  const before = sqliteTableBytes(path);
  const w = new Database(path);
  w.pragma("synchronous = FULL");
  const start = w.prepare("INSERT INTO runs (id, flow, status, input) VALUES (?, ?, 'running', ?)");
  const step = w.prepare("INSERT INTO steps (run_id, step, output) VALUES (?, 's', ?)");
  const end = w.prepare("UPDATE runs SET status = 'completed', output = ? WHERE id = ?");
  const begin = w.transaction((j: HandWrittenJob) => start.run(j.id, j.flow, j.input));
  const finish = w.transaction((j: HandWrittenJob) => {
    step.run(j.id, j.output);
    end.run(j.output, j.id);
  });
  for (const j of jobs) {
    begin.immediate(j);
    finish.immediate(j);
  }
  w.close();
  return grown(before, sqliteTableBytes(path));
}

/** PostgreSQL: the jobs written to a fresh `schema` (created here; the caller drops it). */
export async function pgHandWritten(
  client: pg.Client,
  schema: string,
  jobs: readonly HandWrittenJob[],
): Promise<TableBytes> {
  await client.query(`CREATE SCHEMA "${schema}"`);
  const runs = `"${schema}".runs`;
  const steps = `"${schema}".steps`;
  for (const sql of SCHEMA(runs, steps, "runs_by_status")) await client.query(sql);
  const before = await pgTableBytes(client, schema);
  for (const j of jobs) {
    await client.query(
      `INSERT INTO ${runs} (id, flow, status, input) VALUES ($1, $2, 'running', $3)`,
      [j.id, j.flow, j.input],
    );
    await client.query("BEGIN");
    await client.query(`INSERT INTO ${steps} (run_id, step, output) VALUES ($1, 's', $2)`, [
      j.id,
      j.output,
    ]);
    await client.query(`UPDATE ${runs} SET status = 'completed', output = $1 WHERE id = $2`, [
      j.output,
      j.id,
    ]);
    await client.query("COMMIT");
  }
  return grown(before, await pgTableBytes(client, schema));
}
