/**
 * The store SPI's list query: what `EventStore.list` (spi.ts) filters, sorts and pages by. Its
 * own module so that the contract's file stays one screenful per group.
 *
 * Contract (the conformance suite checks S24, S25; S1..S23 are spi.ts's and spi-records.ts's):
 * S24. An execution's row keeps the `principal` of the batch that holds sequence 0 (as `flow`), and
 *     the `spent` of the latest appended batch that carried one; `list` shows both, a field absent
 *     where none was given. A batch without `spent` leaves the row's as it was.
 * S25. `list` returns the rows every filter admits (status, flow, id prefix, principal,
 *     `minCostUsd` on the cost or 0, `createdFromMs <= created < createdToMs`) by sort key
 *     (list-query.ts `listKeyOf`) then id, both ascending or both descending, after `afterId`
 *     (and `afterKey`, for a sort other than the id) whether or not that row still exists: paging
 *     by each page's last row returns every row once. Bad queries: InvalidInputError.
 */
import type { ExecutionStatus } from "../kernel/events.ts";

/** What `list` orders by (S25). */
export type ListSort = "id" | "created" | "updated" | "cost";

export interface ListQuery {
  status?: readonly ExecutionStatus[];
  flow?: string;
  /** Only the ids that start with this text; only the executions this principal started. */
  idPrefix?: string;
  principal?: string;
  /** Only those that have spent at least this (an execution with no cost counts as 0). */
  minCostUsd?: number;
  /** Only those created at or after this time. */
  createdFromMs?: number;
  /** Only those created before this time (excluded). */
  createdToMs?: number;
  /** Default "id", "asc". */
  sort?: ListSort;
  order?: "asc" | "desc";
  /**
   * Paging (S25): the rows after this id in the order, ties of the sort key broken by id. With a
   * sort other than "id", `afterKey` must come with it: the sort key of that row (`listKeyOf`).
   */
  afterId?: string;
  afterKey?: number;
  limit?: number;
}
