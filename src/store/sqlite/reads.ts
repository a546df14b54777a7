/**
 * Reading logs on SQLite: events by sequence number, heads, and the execution list (S1, S5,
 * S14). Every read sees both event tables, `events` and the append-ordered `events_hot`
 * (hot-events.ts H1), so an event reads the same before and after it settles.
 */
import type Database from "better-sqlite3";
import type { EventStore, ListQuery } from "../spi.ts";
import { summaryOf, type ExecutionRow } from "../rows.ts";
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
      const where: string[] = [];
      const args: (string | number)[] = [];
      if (query.status) {
        if (query.status.length === 0) return [];
        where.push(`status IN (${query.status.map(() => "?").join(", ")})`);
        args.push(...query.status);
      }
      if (query.flow !== undefined) {
        where.push("flow = ?");
        args.push(query.flow);
      }
      if (query.afterId !== undefined) {
        where.push("id > ?");
        args.push(query.afterId);
      }
      const sql =
        "SELECT id, flow, status, created_at," +
        ` ${headOfKey("n")} AS head,` +
        // Appends go to events_hot only and a settle moves all of it, so an execution's hot
        // rows, when it has any, are its newest: two index seeks, no sort.
        " COALESCE((SELECT at FROM events_hot WHERE x = n ORDER BY seq DESC LIMIT 1)," +
        " (SELECT at FROM events WHERE x = n ORDER BY seq DESC LIMIT 1)) AS updated_at" +
        " FROM executions" +
        (where.length ? ` WHERE ${where.join(" AND ")}` : "") +
        " ORDER BY id" +
        (query.limit !== undefined ? ` LIMIT ${Math.max(0, Math.floor(query.limit))}` : "");
      return db
        .prepare<(string | number)[], ExecutionRow>(sql)
        .all(...args)
        .map(summaryOf);
    },
  };
}
