/** Snapshots on PostgreSQL (S8): one row per execution, replaced only by one at a higher `seq`. */
import type pg from "pg";
import type { Snapshot } from "../../fold/state.ts";
import { parsedRow } from "../rows.ts";
import type { SnapshotStore } from "../spi.ts";
import { run, statement, type Tables } from "./db.ts";

export function postgresSnapshots(pool: pg.Pool, t: Tables): SnapshotStore {
  const s = {
    save: statement(
      "save_snapshot",
      `INSERT INTO ${t.snapshots} AS s (execution_id, seq, state) VALUES ($1, $2, $3)
       ON CONFLICT (execution_id) DO UPDATE SET seq = excluded.seq, state = excluded.state
       WHERE excluded.seq >= s.seq`,
    ),
    load: statement(
      "load_snapshot",
      `SELECT seq, state FROM ${t.snapshots} WHERE execution_id = $1`,
    ),
  };

  return {
    async saveSnapshot(id, snapshot) {
      // Serialised before the first await: the caller goes on changing the state it passed.
      const state = JSON.stringify(snapshot.state);
      await run(pool, s.save([id, snapshot.seq, state]));
    },

    async loadSnapshot(id) {
      const { rows } = await run<{ seq: number; state: string }>(pool, s.load([id]));
      const row = rows[0];
      if (!row) return undefined;
      return { seq: row.seq, state: parsedRow(id, row.seq, row.state) as Snapshot["state"] };
    },
  };
}
