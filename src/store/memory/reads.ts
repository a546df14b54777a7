/**
 * Reading logs in the memory store: events by sequence number, heads, and the execution list
 * (S1, S5, S14). What a read returns is a copy (stored-event.ts E1).
 */
import type { EventStore, ExecutionSummary, ListQuery } from "../spi.ts";
import { live, type Handle } from "./data.ts";
import { copyEvent, firstAtOrAfter, lastSeq } from "./stored-event.ts";

export function memoryReads(h: Handle): Omit<EventStore, "appendMany"> {
  const { data } = h;
  return {
    async read(id, fromSeq = 0, limit?: number) {
      live(h);
      const log = data.events.get(id) ?? [];
      const from = firstAtOrAfter(log, Math.max(0, fromSeq));
      const to = limit === undefined ? undefined : from + Math.max(0, limit);
      return log.slice(from, to).map(copyEvent);
    },

    async head(id) {
      live(h);
      return lastSeq(data.events.get(id));
    },

    async list(query: ListQuery = {}) {
      live(h);
      const out: ExecutionSummary[] = [];
      const ids = [...data.executions.keys()].sort();
      // Checked before a row is added, so limit 0 gives none (as SQL's LIMIT does).
      const max = query.limit === undefined ? Infinity : Math.max(0, Math.floor(query.limit));
      for (const id of ids) {
        if (out.length >= max) break;
        const x = data.executions.get(id) as ExecutionSummary;
        if (query.afterId !== undefined && id <= query.afterId) continue;
        if (query.status && !query.status.includes(x.status)) continue;
        if (query.flow !== undefined && x.flow !== query.flow) continue;
        out.push({ ...x });
      }
      return out;
    },
  };
}
