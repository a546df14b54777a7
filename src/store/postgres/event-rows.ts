/**
 * How an event is laid out in a PostgreSQL row since migration 4 (migrations.ts), and read back
 * as the envelope that was appended: readers (the fold, verifyLog, the audit chain) see the same
 * envelope whatever the row format. The SQLite store's rows (sqlite/row-codec.ts) are the model.
 *
 * E1. The execution is its `bigint` key (`executions.n`, an identity column), not its id: the id
 *     is written once, on its executions row, and `events` is keyed by `(x, seq)`.
 * E2. The kind is its `smallint` code (../kind-codes.ts KC1) in `kind`; a kind without one is kept
 *     as its name in `kind_name`, `kind` then NULL. Exactly one of the two is set.
 * E3. A meta that is exactly `{ fence }` with an `integer` fence (nearly every event's) is kept in
 *     the `fence` column, `meta` NULL; any other meta is its JSON text in `meta`, `fence` NULL;
 *     none is both NULL.
 * E4. The columns are in the order that pads least: the three `bigint`s, then `fence` (4 bytes)
 *     and `kind` (2), then the texts (a short text is not aligned), so a step's row is its
 *     payload plus 30 bytes and the tuple header, and its index entry 24 bytes.
 */
import type { Envelope, EnvelopeMeta } from "../../kernel/events.ts";
import { KIND_CODES, kindCode, kindOfCode } from "../kind-codes.ts";
import { envelopeOfCells } from "../rows.ts";

/** The largest fence the `fence` column holds (PostgreSQL's `integer`). */
const MAX_FENCE_CELL = 2_147_483_647;

/** An events row as read (migration 4 on). */
export interface PgEventRow {
  seq: number;
  kind: number | null;
  kind_name: string | null;
  at: number;
  payload: string;
  meta: string | null;
  fence: number | null;
}

/** The columns a read selects, for `PgEventRow`. */
export const EVENT_ROW_COLUMNS = "seq, kind, kind_name, at, payload, meta, fence";

/** E2, E3: how an event travels to the append routine beside its seq, time and payload. */
export interface EventCells {
  /** The kind's code, or absent with `kn` its name. */
  k?: number;
  kn?: string;
  /** The bare fence, or absent with `m` the meta's JSON text (or null: no meta). */
  f?: number;
  m: string | null;
}

/** E2, E3: the cells of `kind` and `meta`. */
export function eventCells(kind: string, meta: EnvelopeMeta | undefined): EventCells {
  const code = kindCode(kind);
  const cells: EventCells = code === undefined ? { kn: kind, m: null } : { k: code, m: null };
  const fence = bareFence(meta);
  if (fence !== undefined) cells.f = fence;
  else if (meta !== undefined) cells.m = JSON.stringify(meta);
  return cells;
}

/** E3: the fence of a meta that is exactly `{ fence }` with a fence the column holds. */
function bareFence(meta: EnvelopeMeta | undefined): number | undefined {
  if (meta === undefined) return undefined;
  const keys = Object.keys(meta);
  const f = meta.fence;
  if (keys.length !== 1 || keys[0] !== "fence" || typeof f !== "number") return undefined;
  return Number.isSafeInteger(f) && f >= 0 && f <= MAX_FENCE_CELL ? f : undefined;
}

/** E1..E3: the envelope row `r` of `executionId` holds; a code no kind has is LogCorruptError. */
export function envelopeOfPgRow(executionId: string, r: PgEventRow): Envelope {
  const kind = r.kind === null ? (r.kind_name ?? undefined) : kindOfCode(r.kind);
  return envelopeOfCells(executionId, { ...r, kind, storedKind: r.kind });
}

/** E2: the codes and the names of `kinds` (a compaction's kept kinds), for `kind`/`kind_name`. */
export function kindLists(kinds: Iterable<string>): { codes: number[]; names: string[] } {
  const codes: number[] = [];
  const names: string[] = [];
  for (const k of kinds) {
    const code = kindCode(k);
    if (code === undefined) names.push(k);
    else codes.push(code);
  }
  return { codes, names };
}

/**
 * SQL for migration 4: the `kind` code of a kind name held in `column`, over the first `count`
 * codes (the migration names how many existed when it was released, so its text never changes),
 * NULL for a name without one.
 */
export function kindCodeSql(column: string, count: number): string {
  const whens = KIND_CODES.slice(0, count)
    .map((k, i) => `WHEN '${k}' THEN ${i}`)
    .join(" ");
  return `CASE ${column} ${whens} END`;
}

/**
 * SQL for migration 4 (E3): the bare fence of a meta text in `column` that the runtime wrote for
 * `{ fence }` (`{"fence":N}`, N of at most 9 digits, so within `integer`), else NULL. Matched as
 * text: a row whose meta is no JSON at all converts too, and reads as corrupt as before.
 */
export function bareFenceSql(column: string): string {
  return `CASE WHEN ${column} ~ '^\\{"fence":(0|[1-9][0-9]{0,8})\\}$'
    THEN substr(${column}, 10, length(${column}) - 10)::integer END`;
}
