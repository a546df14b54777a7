/**
 * How an event is laid out in a SQLite row since migration 6 (migrations.ts), and read back as
 * the envelope that was appended: readers (the fold, verifyLog, the audit chain) see the same
 * envelope whatever the row format.
 *
 * C1. The execution is its integer key (`executions.n`), not its id: the id is written once, on
 *     its executions row. Keys are unique, not dense (append.ts A4 reserves them in blocks).
 * C2. The kind is a small integer code (KIND_CODES, ../kind-codes.ts, shared with the PostgreSQL
 *     store); a kind without one is kept as its name.
 * C3. A meta that is exactly `{ fence }` (nearly every event's) is kept as the integer fence;
 *     any other is its JSON text; none is NULL.
 */
import type { Envelope, EnvelopeMeta } from "../../kernel/events.ts";
import { KIND_CODES, kindCode } from "../kind-codes.ts";
import { envelopeOfCells } from "../rows.ts";

export { KIND_CODES } from "../kind-codes.ts";

/** C2: what the `kind` column holds for `kind`. */
export function kindCell(kind: string): number | string {
  return kindCode(kind) ?? kind;
}

/** C3: what the `meta` column holds for `meta`. */
export function metaCell(meta: EnvelopeMeta | undefined): number | string | null {
  if (meta === undefined) return null;
  const keys = Object.keys(meta);
  if (keys.length === 1 && keys[0] === "fence" && Number.isSafeInteger(meta.fence)) {
    return meta.fence as number;
  }
  return JSON.stringify(meta);
}

/** An events row as read (migration 6 on). */
export interface StoredEventRow {
  seq: number;
  kind: number | string;
  at: number;
  payload: string;
  meta: number | string | null;
}

/** C1..C3: the envelope `row` of `executionId` holds; an unknown kind code is LogCorruptError. */
export function envelopeOfRow(executionId: string, r: StoredEventRow): Envelope {
  const kind = typeof r.kind === "number" ? KIND_CODES[r.kind] : r.kind;
  const fence = typeof r.meta === "number" ? r.meta : null;
  const meta = typeof r.meta === "string" ? r.meta : null;
  return envelopeOfCells(executionId, { ...r, kind, storedKind: r.kind, fence, meta });
}

/**
 * SQL: the `kind` column's code for a kind name held in `column`, over the first `count` codes
 * (a migration names how many existed when it was released, so its text never changes).
 */
export function kindCodeSql(column: string, count: number): string {
  const whens = KIND_CODES.slice(0, count)
    .map((k, i) => `WHEN '${k}' THEN ${i}`)
    .join(" ");
  return `CASE ${column} ${whens} ELSE ${column} END`;
}
