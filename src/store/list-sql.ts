/**
 * The execution list's query as SQL (spi.ts S25), for both SQL stores: the filters, the keyset
 * condition and the order, over the columns both keep alike (`id`, `flow`, `status`,
 * `principal`, `created_at`, `cost_usd`); the last update's column is the store's to name
 * (PostgreSQL keeps it, SQLite reads it from the events).
 *
 * LS1. The sort key is the column (or expression) an index is on: `COST_KEY_SQL` for the cost
 *      (the expression both schemas index), `created_at`, the store's updated column; the id
 *      sort orders by `id` alone.
 * LS2. Paging is a row comparison `(key, id) > (?, ?)` (`<` descending): one index range, and the
 *      same order the rows are sorted in, so no row is skipped or repeated between pages.
 */
import type { ListQuery, ListSort } from "./spi.ts";

/** LS1: the cost sort key, as both schemas index it (no cost counts as 0). */
export const COST_KEY_SQL = "coalesce(cost_usd, 0)";

export interface ListSql {
  /** Conditions to AND; one over the sort key, the keyset's, when the query pages. */
  where: string[];
  orderBy: string;
}

/** S25 as SQL; `param` adds a value and returns its placeholder; `updated` names the update time. */
export function listSql(
  q: ListQuery,
  sort: ListSort,
  desc: boolean,
  param: (v: unknown) => string,
  updated: string,
): ListSql {
  const where: string[] = [];
  if (q.status) where.push(`status IN (${q.status.map((s) => param(s)).join(", ")})`);
  if (q.flow !== undefined) where.push(`flow = ${param(q.flow)}`);
  if (q.idPrefix !== undefined && q.idPrefix !== "") {
    // Ids are ASCII below DEL (kernel/ids.ts): the ids that start with the prefix are one range.
    where.push(`id >= ${param(q.idPrefix)} AND id < ${param(`${q.idPrefix}\u007f`)}`);
  }
  if (q.principal !== undefined) where.push(`principal = ${param(q.principal)}`);
  if (q.minCostUsd !== undefined) where.push(`${COST_KEY_SQL} >= ${param(q.minCostUsd)}`);
  // Times are integers: a bound between two is the next one up, and stays an integer parameter.
  if (q.createdFromMs !== undefined) {
    where.push(`created_at >= ${param(Math.ceil(q.createdFromMs))}`);
  }
  if (q.createdToMs !== undefined) where.push(`created_at < ${param(Math.ceil(q.createdToMs))}`);
  const key =
    sort === "created"
      ? "created_at"
      : sort === "updated"
        ? updated
        : sort === "cost"
          ? COST_KEY_SQL
          : undefined;
  const cmp = desc ? "<" : ">";
  const dir = desc ? " DESC" : "";
  if (q.afterId !== undefined) {
    where.push(
      key === undefined
        ? `id ${cmp} ${param(q.afterId)}`
        : `(${key}, id) ${cmp} (${param(q.afterKey ?? 0)}, ${param(q.afterId)})`,
    );
  }
  const orderBy = key === undefined ? `id${dir}` : `${key}${dir}, id${dir}`;
  return { where, orderBy };
}
