/**
 * Snapshots on SQLite (S8): one row per execution, replaced only by one at a higher `seq`.
 *
 * N1. A state of SNAPSHOT_DEFLATE_BYTES or more is kept deflated (raw deflate of its JSON text,
 *     a BLOB): a state repeats its frames' keys and shapes, and SQLite, unlike PostgreSQL's TOAST,
 *     compresses nothing itself. A TEXT row (a smaller state, or one written before) is read as
 *     it is, so both kinds read back as the text that was saved.
 * N2. zlib works in ZLIB_CHUNK_BYTES chunks both ways: at its default (16 KiB, under the 32 KiB
 *     window) inflating a 1.25 MB state took 7-8 ms, at 64 KiB 0.4-3.6 ms. Inflated text that is
 *     all ASCII is decoded as latin1 (the same characters byte for byte; utf8 takes about 4 ms
 *     for 1.25 MB, latin1 well under 1); text with any byte above 0x7f (a state's strings keep
 *     their characters, JSON.stringify escapes none of them) is decoded as utf8.
 */
import { isAscii } from "node:buffer";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import type { Snapshot } from "../../fold/state.ts";
import { parsedRow } from "../rows.ts";
import type { SnapshotStore } from "../spi.ts";
import type { Statements } from "./statements.ts";

export const SNAPSHOT_DEFLATE_BYTES = 1024;
const ZLIB_CHUNK_BYTES = 64 * 1024;

/** N1: what the `state` column holds for a state's JSON text. */
export function snapshotCell(stateJson: string): string | Buffer {
  if (stateJson.length < SNAPSHOT_DEFLATE_BYTES) return stateJson;
  return deflateRawSync(Buffer.from(stateJson, "utf8"), { level: 6, chunkSize: ZLIB_CHUNK_BYTES });
}

/** N1: the JSON text a `state` cell holds. */
export function snapshotText(cell: string | Buffer): string {
  if (typeof cell === "string") return cell;
  const bytes = inflateRawSync(cell, { chunkSize: ZLIB_CHUNK_BYTES });
  return bytes.toString(isAscii(bytes) ? "latin1" : "utf8");
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
