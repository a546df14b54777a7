/**
 * Event rows of a SQLite file read and written behind the store's back, in the row format of
 * migration 6 (src/store/sqlite/row-codec.ts C1..C3): tests that spoil or forge a row see the
 * kind and meta as text, as they were appended.
 */
import type Database from "better-sqlite3";
import { KIND_CODES, kindCell, metaCell } from "../../src/store/sqlite/row-codec.ts";

/** Events live in `events` or, until they settle, in `events_hot` (docs/decisions/0006). */
export const EVENT_TABLES = ["events", "events_hot"] as const;

/** SQL: the rows of the execution whose id is the next `?` parameter (C1). */
export const OF_EXECUTION = "x = (SELECT n FROM executions WHERE id = ?)";

export interface TextRow {
  seq: number;
  kind: string;
  at: number;
  payload: string;
  meta: string | null;
}

interface Cells {
  seq: number;
  kind: number | string;
  at: number;
  payload: string;
  meta: number | string | null;
}

function textRow(c: Cells): TextRow {
  const kind = typeof c.kind === "number" ? (KIND_CODES[c.kind] ?? String(c.kind)) : c.kind;
  const meta = typeof c.meta === "number" ? JSON.stringify({ fence: c.meta }) : c.meta;
  return { seq: c.seq, kind, at: c.at, payload: c.payload, meta };
}

/** Every event row of `id`, by seq, from both tables. */
export function textRows(db: Database.Database, id: string): TextRow[] {
  return EVENT_TABLES.flatMap((t) =>
    db
      .prepare<[string], Cells>(
        `SELECT seq, kind, at, payload, meta FROM ${t} WHERE ${OF_EXECUTION}`,
      )
      .all(id)
      .map(textRow),
  ).sort((a, b) => a.seq - b.seq);
}

/** Rewrites the row `id`, `row.seq` in whichever table holds it; returns the rows changed. */
export function writeTextRow(db: Database.Database, id: string, row: TextRow): number {
  const meta = row.meta === null ? null : metaCell(JSON.parse(row.meta) as Record<string, never>);
  let changed = 0;
  for (const t of EVENT_TABLES) {
    changed += db
      .prepare(
        `UPDATE ${t} SET kind = ?, at = ?, payload = ?, meta = ? WHERE ${OF_EXECUTION} AND seq = ?`,
      )
      .run(kindCell(row.kind), row.at, row.payload, meta, id, row.seq).changes;
  }
  return changed;
}
