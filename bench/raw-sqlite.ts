/**
 * The floor for a durable step on SQLite: better-sqlite3 alone, one row per transaction, on a
 * fresh file with the pragmas the store uses (WAL, the same `synchronous`). Nothing of Loom runs;
 * what is left is SQLite's commit (and, with FULL, its fsync of the WAL).
 */
import Database from "better-sqlite3";
import { cpuMs, nowMs } from "./lib.ts";

export type Synchronous = "FULL" | "NORMAL";

export interface RawResult {
  rows: number;
  totalMs: number;
  cpuMs: number;
  perRowUs: number;
}

/** Writes `rows` event-like rows, each in its own `BEGIN IMMEDIATE` transaction. */
export function rawSqliteLoop(path: string, rows: number, synchronous: Synchronous): RawResult {
  const db = new Database(path);
  try {
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${synchronous}`);
    db.exec(`CREATE TABLE events (
      execution_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      kind TEXT NOT NULL,
      at INTEGER NOT NULL,
      payload TEXT NOT NULL,
      PRIMARY KEY (execution_id, seq)
    ) WITHOUT ROWID`);
    const insert = db.prepare(
      "INSERT INTO events (execution_id, seq, kind, at, payload) VALUES (?, ?, ?, ?, ?)",
    );
    const one = db.transaction((seq: number) => {
      const payload = JSON.stringify({ callId: `s#${seq}`, output: seq });
      insert.run("raw-execution", seq, "STEP_COMPLETED", Date.now(), payload);
    });
    const t0 = nowMs();
    const c0 = cpuMs();
    for (let seq = 0; seq < rows; seq++) one.immediate(seq);
    const totalMs = nowMs() - t0;
    return { rows, totalMs, cpuMs: cpuMs() - c0, perRowUs: (totalMs * 1000) / rows };
  } finally {
    db.close();
  }
}
