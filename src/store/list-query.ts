/**
 * The execution list's query, as every store reads it (spi.ts S25): its check, and the sort key of
 * a row, so the three stores and the pages built on them (ui/list.ts) agree on one order.
 *
 * LQ1. A query is checked before anything is read: a sort or order that is not one of the known
 *      ones, a number that is not finite (or a negative `minCostUsd`), or a sort other than the id
 *      paged by `afterId` without `afterKey` (or, for a time sort, with one that is no integer),
 *      is InvalidInputError naming the field.
 * LQ2. The sort key of a row: its creation time, its last update time, or its cost with no cost
 *      counted as 0; the id sort has none (the id is the order). Ties are broken by the id.
 */
import { InvalidInputError } from "../kernel/errors.ts";
import type { ExecutionSummary, ListQuery, ListSort } from "./spi.ts";

export const LIST_SORTS: readonly ListSort[] = ["id", "created", "updated", "cost"];

/** LQ2: the sort key of `row` under `sort` (0 for the id sort, which orders by the id alone). */
export function listKeyOf(row: ExecutionSummary, sort: ListSort | undefined): number {
  switch (sort) {
    case "created":
      return row.createdAtMs;
    case "updated":
      return row.updatedAtMs;
    case "cost":
      return row.costUsd ?? 0;
    default:
      return 0;
  }
}

/** LQ1: throws InvalidInputError on a malformed query; returns its sort and whether it descends. */
export function checkListQuery(q: ListQuery): { sort: ListSort; desc: boolean } {
  const sort = q.sort ?? "id";
  if (!LIST_SORTS.includes(sort)) {
    throw new InvalidInputError(
      `list sort must be one of ${LIST_SORTS.join(", ")}, got ${JSON.stringify(sort)}`,
    );
  }
  const order = q.order ?? "asc";
  if (order !== "asc" && order !== "desc") {
    throw new InvalidInputError(`list order must be asc or desc, got ${JSON.stringify(order)}`);
  }
  for (const field of ["minCostUsd", "createdFromMs", "createdToMs", "afterKey"] as const) {
    const v = q[field];
    if (v !== undefined && (typeof v !== "number" || !Number.isFinite(v))) {
      throw new InvalidInputError(`list ${field} must be a finite number, got ${String(v)}`);
    }
  }
  if (q.minCostUsd !== undefined && q.minCostUsd < 0) {
    throw new InvalidInputError(`list minCostUsd must be >= 0, got ${q.minCostUsd}`);
  }
  if (sort !== "id" && q.afterId !== undefined && q.afterKey === undefined) {
    throw new InvalidInputError(`list afterId with sort ${sort} needs afterKey (the row's key)`);
  }
  if ((sort === "created" || sort === "updated") && q.afterKey !== undefined) {
    if (!Number.isSafeInteger(q.afterKey)) {
      throw new InvalidInputError(`list afterKey of sort ${sort} must be an integer time`);
    }
  }
  return { sort, desc: order === "desc" };
}
