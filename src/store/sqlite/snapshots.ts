/** Snapshots on SQLite (S8): one row per execution, replaced only by one at a higher `seq`. */
import type { Snapshot } from "../../fold/state.ts";
import { parsedRow } from "../rows.ts";
import type { SnapshotStore } from "../spi.ts";
import type { Statements } from "./statements.ts";

export function sqliteSnapshots(q: Statements): SnapshotStore {
  return {
    async saveSnapshot(id, snapshot) {
      q.saveSnapshot.run(id, snapshot.seq, JSON.stringify(snapshot.state));
    },

    async loadSnapshot(id) {
      const row = q.loadSnapshot.get(id);
      if (!row) return undefined;
      return { seq: row.seq, state: parsedRow(id, row.seq, row.state) as Snapshot["state"] };
    },
  };
}
