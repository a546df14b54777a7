/**
 * Reading logs on PostgreSQL: events by sequence number, heads, and the execution list (S1, S5,
 * S14). Payloads and metas are stored as the JSON text the runtime made, so what `read` returns
 * parses from exactly the bytes appended; the row's other cells read back as the envelope
 * appended (event-rows.ts E1..E3).
 */
import type pg from "pg";
import type { EventStore } from "../spi.ts";
import { run, statement, type Tables } from "./db.ts";
import { LISTED_COLUMNS, summaryOf, type ExecutionRow } from "../rows.ts";
import { checkListQuery } from "../list-query.ts";
import { listSql } from "../list-sql.ts";
import { EVENT_ROW_COLUMNS, envelopeOfPgRow, type PgEventRow } from "./event-rows.ts";

export function postgresReads(pool: pg.Pool, t: Tables): Omit<EventStore, "appendMany"> {
  const s = {
    // LIMIT NULL is no limit.
    // E1: the events under the execution's key.
    read: statement(
      "read",
      `SELECT ${EVENT_ROW_COLUMNS} FROM ${t.events}
       WHERE x = (SELECT n FROM ${t.executions} WHERE id = $1) AND seq >= $2
       ORDER BY seq LIMIT $3`,
    ),
    head: statement("head", `SELECT head FROM ${t.executions} WHERE id = $1`),
  };

  return {
    async read(id, fromSeq = 0, limit) {
      const max = limit === undefined ? null : Math.max(0, Math.floor(limit));
      const { rows } = await run<PgEventRow>(
        pool,
        s.read([id, Math.max(0, Math.ceil(fromSeq)), max]),
      );
      return rows.map((r) => envelopeOfPgRow(id, r));
    },

    async head(id) {
      const { rows } = await run<{ head: number }>(pool, s.head([id]));
      return rows[0]?.head ?? -1;
    },

    async list(query = {}) {
      const { sort, desc } = checkListQuery(query);
      if (query.status?.length === 0) return [];
      const values: unknown[] = [];
      const param = (v: unknown) => {
        values.push(v);
        return `$${values.length}`;
      };
      const { where, orderBy } = listSql(query, sort, desc, param, "updated_at");
      const limit = query.limit === undefined ? null : Math.max(0, Math.floor(query.limit));
      const sql =
        `SELECT id, flow, status, head, created_at, updated_at, ${LISTED_COLUMNS} FROM ${t.executions}` +
        (where.length ? ` WHERE ${where.join(" AND ")}` : "") +
        ` ORDER BY ${orderBy} LIMIT ${param(limit)}`;
      const { rows } = await run<ExecutionRow>(pool, { text: sql, values });
      return rows.map(summaryOf);
    },
  };
}
