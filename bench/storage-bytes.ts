/**
 * How `bench storage` counts bytes, per store, and what an event's bytes are made of.
 *
 * SQLite: after the WAL is checkpointed (TRUNCATE), the pages each table and index uses, from the
 * `dbstat` virtual table (`pgsize`: whole pages, so page fill counts), by table; the file's
 * freelist is not counted. PostgreSQL: after VACUUM, `pg_total_relation_size` of every table of
 * the schema (heap, its indexes, its TOAST table and index) less the free-space and visibility
 * maps (`fsm`, `vm` forks), which VACUUM adds per table whatever the rows: they say where space is
 * free, they hold no row.
 */
import Database from "better-sqlite3";
import pg from "pg";
import type { Envelope } from "../src/kernel/events.ts";
import type { Field } from "./lib.ts";

/** Bytes by table (or index) name. */
export type TableBytes = Record<string, number>;

/** SQLite: pages used by each table and index of the file at `path`, WAL checkpointed first. */
export function sqliteTableBytes(path: string): TableBytes {
  const db = new Database(path);
  try {
    db.pragma("wal_checkpoint(TRUNCATE)");
    const rows = db
      .prepare<[], { name: string; bytes: number }>(
        "SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY name",
      )
      .all();
    return Object.fromEntries(rows.map((r) => [r.name, r.bytes]));
  } finally {
    db.close();
  }
}

/** PostgreSQL: every table of `schema`, indexes and TOAST included, fsm/vm forks excluded. */
export async function pgTableBytes(client: pg.Client, schema: string): Promise<TableBytes> {
  const tables = await client.query<{ name: string }>(
    "SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 ORDER BY tablename",
    [schema],
  );
  for (const t of tables.rows) await client.query(`VACUUM "${schema}"."${t.name}"`);
  const sizes = await client.query<{ name: string; bytes: string }>(
    `SELECT c.relname AS name,
            pg_total_relation_size(c.oid)
              - pg_relation_size(c.oid, 'fsm') - pg_relation_size(c.oid, 'vm')
              - COALESCE(pg_relation_size(c.reltoastrelid, 'fsm')
                         + pg_relation_size(c.reltoastrelid, 'vm'), 0) AS bytes
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname`,
    [schema],
  );
  return Object.fromEntries(sizes.rows.map((r) => [r.name, Number(r.bytes)]));
}

/** `after - before`, table by table (a table `before` lacks counts whole). */
export function grown(before: TableBytes, after: TableBytes): TableBytes {
  const out: TableBytes = {};
  for (const [name, bytes] of Object.entries(after)) {
    const d = bytes - (before[name] ?? 0);
    if (d !== 0) out[name] = d;
  }
  return out;
}

export const total = (t: TableBytes): number => Object.values(t).reduce((s, x) => s + x, 0);

const utf8 = (s: string): number => Buffer.byteLength(s, "utf8");

/** Bytes of a SQLite integer in a record (its serial type's content size). */
function intBytes(n: number): number {
  if (n === 0 || n === 1) return 0;
  const a = n < 0 ? -n - 1 : n;
  if (a < 128) return 1;
  if (a < 32_768) return 2;
  if (a < 8_388_608) return 3;
  if (a < 2_147_483_648) return 4;
  if (a < 140_737_488_355_328) return 6;
  return 8;
}

/** How a store's row holds an event's execution, kind and meta. */
export interface RowCells {
  execution: number | string;
  kind: number | string;
  meta: number | string | null;
}

const cellBytes = (v: number | string | null): number =>
  v === null ? 0 : typeof v === "number" ? intBytes(v) : utf8(v);

/**
 * An event's bytes by field as `cells` says the store's row holds them (the execution id or key,
 * the kind or its code, the meta or a bare fence), seq and at as SQLite integers, and each
 * top-level payload field as JSON text (`"name":value,`). What a store adds (record headers,
 * index entries, page fill, its own encoding) is the measured total less these.
 */
export function fieldBytes(e: Envelope, cells: RowCells): Record<string, number> {
  const out: Record<string, number> = {
    execution: cellBytes(cells.execution),
    seq: intBytes(e.seq),
    kind: cellBytes(cells.kind),
    at: intBytes(e.at),
  };
  const p = e.payload;
  if (p !== null && typeof p === "object" && !Array.isArray(p)) {
    out["payload{}"] = 2 - 1; // the braces, less the last field's comma counted below
    for (const [k, v] of Object.entries(p)) {
      if (v !== undefined) out[`payload.${k}`] = utf8(`"${k}":${JSON.stringify(v)},`);
    }
  } else {
    out.payload = utf8(JSON.stringify(p));
  }
  out.meta = cellBytes(cells.meta);
  return out;
}

/** The mean of several events' field bytes, field by field, rounded to a tenth. */
export function meanFields(rows: readonly Record<string, number>[]): { [k: string]: Field } {
  const sums = new Map<string, number>();
  for (const r of rows) for (const [k, v] of Object.entries(r)) sums.set(k, (sums.get(k) ?? 0) + v);
  const out: { [k: string]: Field } = {};
  for (const [k, v] of sums) out[k] = Math.round((v / Math.max(1, rows.length)) * 10) / 10;
  return out;
}

export const sumFields = (r: { [k: string]: Field }): number =>
  Object.values(r).reduce<number>((s, v) => s + (typeof v === "number" ? v : 0), 0);
