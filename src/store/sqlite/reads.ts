/**
 * Reading logs on SQLite: events by sequence number, heads, and the execution list (S1, S5,
 * S14). Every read sees both event tables, `events` and the append-ordered `events_hot`
 * (hot-events.ts H1), so an event reads the same before and after it settles.
 */
import type Database from "better-sqlite3";
import type { EventStore, ListQuery } from "../spi.ts";
import { LISTED_COLUMNS, summaryOf, type ExecutionRow } from "../rows.ts";
import { checkListQuery } from "../list-query.ts";
import { listSql } from "../list-sql.ts";
import { envelopeOfRow } from "./row-codec.ts";
import { headOfKey, type Statements } from "./statements.ts";

export function sqliteReads(db: Database.Database, q: Statements): Omit<EventStore, "appendMany"> {
  return {
    async read(id, fromSeq = 0, limit?: number) {
      const max = limit === undefined ? -1 : Math.max(0, limit);
      return q.read
        .all({ id, from: Math.max(0, fromSeq), limit: max })
        .map((r) => envelopeOfRow(id, r));
    },

    async head(id) {
      return q.head.get({ id })?.head ?? -1;
    },

    async list(query: ListQuery = {}) {
      const statement = listStatement(query);
      if (!statement) return [];
      return db
        .prepare<unknown[], ExecutionRow>(statement.sql)
        .all(...statement.args)
        .map(summaryOf);
    },
  };
}

/** The list's SQL and its arguments (S25), or undefined when nothing can match; exported for EXPLAIN. */
export function listStatement(query: ListQuery): { sql: string; args: unknown[] } | undefined {
  const { sort, desc } = checkListQuery(query);
  if (query.status?.length === 0) return undefined;
  const args: unknown[] = [];
  const param = (v: unknown) => {
    args.push(v);
    return "?";
  };
  const { where, orderBy } = listSql(query, sort, desc, param, "updated_at");
  const limit = query.limit === undefined ? "" : ` LIMIT ${Math.max(0, Math.floor(query.limit))}`;
  // The last update is read from the events (no column an append would have to write): in a
  // subquery, so that a sort or page by it can name it.
  const sql =
    `SELECT * FROM (SELECT id, flow, status, created_at, ${LISTED_COLUMNS},` +
    ` ${headOfKey("n")} AS head, ${UPDATED_AT} AS updated_at FROM executions)` +
    (where.length ? ` WHERE ${where.join(" AND ")}` : "") +
    ` ORDER BY ${orderBy}${limit}`;
  return { sql, args };
}

/**
 * SQL: an execution's last update. Appends go to events_hot only and a settle moves all of it,
 * so an execution's hot rows, when it has any, are its newest: two index seeks, no sort.
 */
const UPDATED_AT =
  "COALESCE((SELECT at FROM events_hot WHERE x = n ORDER BY seq DESC LIMIT 1)," +
  " (SELECT at FROM events WHERE x = n ORDER BY seq DESC LIMIT 1))";
