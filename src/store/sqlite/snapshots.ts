/**
 * Snapshots on SQLite (S8): one row per execution, replaced only by one at a higher `seq`.
 *
 * N1. A state of SNAPSHOT_DEFLATE_BYTES or more is kept deflated (raw deflate of its JSON text,
 *     a BLOB): a state repeats its frames' keys and shapes, and SQLite, unlike PostgreSQL's TOAST,
 *     compresses nothing itself. A TEXT row (a smaller state, or one written before) is read as
 *     it is, so both kinds read back as the text that was saved.
 */
import { deflateRawSync, inflateRawSync } from "node:zlib";
import type { Snapshot } from "../../fold/state.ts";
import { parsedRow } from "../rows.ts";
import type { SnapshotStore } from "../spi.ts";
import type { Statements } from "./statements.ts";

export const SNAPSHOT_DEFLATE_BYTES = 1024;

/** N1: what the `state` column holds for a state's JSON text. */
export function snapshotCell(stateJson: string): string | Buffer {
  if (stateJson.length < SNAPSHOT_DEFLATE_BYTES) return stateJson;
  return deflateRawSync(Buffer.from(stateJson, "utf8"), { level: 6 });
}

/** N1: the JSON text a `state` cell holds. */
export function snapshotText(cell: string | Buffer): string {
  return typeof cell === "string" ? cell : inflateRawSync(cell).toString("utf8");
}

export function sqliteSnapshots(q: Statements): SnapshotStore {
  return {
    async saveSnapshot(id, snapshot) {
      q.saveSnapshot.run(id, snapshot.seq, snapshotCell(JSON.stringify(snapshot.state)));
    },

    async loadSnapshot(id) {
      const row = q.loadSnapshot.get(id);
      if (!row) return undefined;
      const state = parsedRow(id, row.seq, snapshotText(row.state)) as Snapshot["state"];
      return { seq: row.seq, state };
    },
  };
}
