/**
 * Event rows of a PostgreSQL schema read and written behind the store's back, in the row format
 * of migration 4 (src/store/postgres/event-rows.ts E1..E3): tests that spoil or forge a row see
 * the kind and meta as text, as they were appended.
 */
import type pg from "pg";
import type { EnvelopeMeta } from "../../src/kernel/events.ts";
import { kindOfCode } from "../../src/store/kind-codes.ts";
import { eventCells } from "../../src/store/postgres/event-rows.ts";

/** SQL: the rows of the execution whose id is the parameter `$1` (E1). */
export const OF_EXECUTION = (schema: string) =>
  `x = (SELECT n FROM "${schema}".executions WHERE id = $1)`;

export interface TextRow {
  kind: string;
  at: number;
  payload: string;
  meta: string | null;
}

interface Cells {
  kind: number | null;
  kind_name: string | null;
  at: string;
  payload: string;
  meta: string | null;
  fence: number | null;
}

/** The row `id`, `seq` with its kind and meta as text (E2, E3). */
export async function textRow(
  client: pg.ClientBase,
  schema: string,
  id: string,
  seq: number,
): Promise<TextRow | undefined> {
  const { rows } = await client.query<Cells>(
    `SELECT kind, kind_name, at, payload, meta, fence FROM "${schema}".events
     WHERE ${OF_EXECUTION(schema)} AND seq = $2`,
    [id, seq],
  );
  const c = rows[0];
  if (!c) return undefined;
  const kind = c.kind === null ? (c.kind_name ?? "") : (kindOfCode(c.kind) ?? String(c.kind));
  const meta = c.fence === null ? c.meta : JSON.stringify({ fence: c.fence });
  return { kind, at: Number(c.at), payload: c.payload, meta };
}

/** Rewrites the row `id`, `seq` from text; returns the rows changed. */
export async function writeTextRow(
  client: pg.ClientBase,
  schema: string,
  id: string,
  seq: number,
  row: TextRow,
): Promise<number> {
  const meta = row.meta === null ? undefined : parsedMeta(row.meta);
  const cells =
    meta === "unparsed"
      ? { ...eventCells(row.kind, undefined), m: row.meta }
      : eventCells(row.kind, meta);
  const { rowCount } = await client.query(
    `UPDATE "${schema}".events SET kind = $3, kind_name = $4, at = $5, payload = $6, meta = $7,
       fence = $8
     WHERE ${OF_EXECUTION(schema)} AND seq = $2`,
    [id, seq, cells.k ?? null, cells.kn ?? null, row.at, row.payload, cells.m, cells.f ?? null],
  );
  return rowCount ?? 0;
}

/** A meta text as the object it holds, or "unparsed" for text that is no JSON object. */
function parsedMeta(text: string): EnvelopeMeta | "unparsed" {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === "object" && !Array.isArray(v)
      ? (v as EnvelopeMeta)
      : "unparsed";
  } catch {
    return "unparsed";
  }
}
