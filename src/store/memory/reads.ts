/**
 * Reading logs in the memory store: events by sequence number, heads, and the execution list
 * (S1, S5, S14). What a read returns is a copy (stored-event.ts E1).
 */
import type { EventStore, ExecutionSummary, ListQuery } from "../spi.ts";
import { checkListQuery, listKeyOf } from "../list-query.ts";
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
      const { sort, desc } = checkListQuery(query);
      // Checked before a row is added, so limit 0 gives none (as SQL's LIMIT does).
      const max = query.limit === undefined ? Infinity : Math.max(0, Math.floor(query.limit));
      const sign = desc ? -1 : 1;
      /** S25: (key, id) pairs in the list's order. */
      const compare = (ka: number, a: string, kb: number, b: string): number =>
        sign * (ka - kb || compareIds(a, b));
      const { afterId, afterKey = 0 } = query;
      const rows = [...data.executions.values()]
        .filter(
          (x) =>
            admits(query, x) &&
            (afterId === undefined ||
              compare(listKeyOf(x, sort), x.executionId, afterKey, afterId) > 0),
        )
        .sort((a, b) =>
          compare(listKeyOf(a, sort), a.executionId, listKeyOf(b, sort), b.executionId),
        );
      return rows.slice(0, max).map((x) => ({ ...x }));
    },
  };
}

/** Ids compare by their UTF-16 code units, as `sort()` and SQL's byte order agree for ids. */
const compareIds = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** S25: whether every filter of `q` admits `x`. */
function admits(q: ListQuery, x: ExecutionSummary): boolean {
  if (q.status && !q.status.includes(x.status)) return false;
  if (q.flow !== undefined && x.flow !== q.flow) return false;
  if (q.idPrefix !== undefined && !x.executionId.startsWith(q.idPrefix)) return false;
  if (q.principal !== undefined && x.principal !== q.principal) return false;
  if (q.minCostUsd !== undefined && (x.costUsd ?? 0) < q.minCostUsd) return false;
  if (q.createdFromMs !== undefined && x.createdAtMs < q.createdFromMs) return false;
  if (q.createdToMs !== undefined && x.createdAtMs >= q.createdToMs) return false;
  return true;
}
