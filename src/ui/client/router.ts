/**
 * The client's routes, read from and written to the URL's hash, so every view can be bookmarked
 * and reloaded. Pure (no DOM), so the tests run it in Node.
 *
 * Invariants (tests cite U1..U3):
 * U1. `#/x/<id>` is an execution (its id URL-encoded, `/` included), `#/schedules` the
 *     schedules, `#/fleet` the fleet, `#/flow-control` the queues and limiters, and anything else
 *     the list.
 * U2. The list's filters, sort and cursor round-trip through the hash: `parseRoute(listHash(f))`
 *     gives `f` back; unknown statuses, sorts and non-numbers are dropped, not passed on.
 * U3. `listQuery` asks the API (api-types.ts ListAnswer) for exactly the hash's filters, by the
 *     API's parameter names; the cursor `after` is passed back as it came (it is opaque).
 */
import { STATUSES, type Status } from "./format.ts";

export const SORTS = ["id", "created", "updated", "cost"] as const;
export type Sort = (typeof SORTS)[number];

export interface ListFilters {
  status: Status[];
  flow: string;
  /** An id or its start. */
  q: string;
  principal: string;
  minCostUsd?: number;
  createdFromMs?: number;
  createdToMs?: number;
  sort?: Sort;
  order?: "asc" | "desc";
  /** The opaque cursor of the page shown (ListAnswer.next of the page before). */
  after: string;
}

export type Route =
  | { page: "list"; filters: ListFilters }
  | { page: "execution"; id: string }
  | { page: "schedules" }
  | { page: "fleet" }
  | { page: "flow-control" };

export const emptyFilters = (): ListFilters => ({
  status: [],
  flow: "",
  q: "",
  principal: "",
  after: "",
});

function num(text: string | null): number | undefined {
  if (text === null || text.trim() === "") return undefined;
  const n = Number(text);
  return Number.isFinite(n) ? n : undefined;
}

function filtersOf(params: URLSearchParams): ListFilters {
  const f = emptyFilters();
  f.status = (params.get("status") ?? "")
    .split(",")
    .filter((s): s is Status => (STATUSES as readonly string[]).includes(s));
  f.flow = params.get("flow") ?? "";
  f.q = params.get("q") ?? "";
  f.principal = params.get("principal") ?? "";
  f.after = params.get("after") ?? "";
  const minCost = num(params.get("minCostUsd"));
  const from = num(params.get("createdFromMs"));
  const to = num(params.get("createdToMs"));
  if (minCost !== undefined) f.minCostUsd = minCost;
  if (from !== undefined) f.createdFromMs = from;
  if (to !== undefined) f.createdToMs = to;
  const sort = params.get("sort");
  if ((SORTS as readonly (string | null)[]).includes(sort)) f.sort = sort as Sort;
  const order = params.get("order");
  if (order === "asc" || order === "desc") f.order = order;
  return f;
}

/** U1: the route of a location hash (`#/...`). */
export function parseRoute(hash: string): Route {
  const path = hash.startsWith("#") ? hash.slice(1) : hash;
  const at = path.indexOf("?");
  const pathname = at < 0 ? path : path.slice(0, at);
  const params = new URLSearchParams(at < 0 ? "" : path.slice(at + 1));
  if (pathname.startsWith("/x/")) {
    const raw = pathname.slice(3);
    try {
      return { page: "execution", id: decodeURIComponent(raw) };
    } catch {
      return { page: "execution", id: raw };
    }
  }
  if (pathname === "/schedules") return { page: "schedules" };
  if (pathname === "/fleet") return { page: "fleet" };
  if (pathname === "/flow-control") return { page: "flow-control" };
  return { page: "list", filters: filtersOf(params) };
}

/** The filters as query parameters, by the API's names (U3), without `limit`. */
export function filterParams(f: ListFilters): URLSearchParams {
  const p = new URLSearchParams();
  if (f.status.length > 0) p.set("status", f.status.join(","));
  if (f.flow) p.set("flow", f.flow);
  if (f.q) p.set("q", f.q);
  if (f.principal) p.set("principal", f.principal);
  if (f.minCostUsd !== undefined) p.set("minCostUsd", String(f.minCostUsd));
  if (f.createdFromMs !== undefined) p.set("createdFromMs", String(f.createdFromMs));
  if (f.createdToMs !== undefined) p.set("createdToMs", String(f.createdToMs));
  if (f.sort) p.set("sort", f.sort);
  if (f.order) p.set("order", f.order);
  if (f.after) p.set("after", f.after);
  return p;
}

/** U2: the hash of the list with these filters. */
export function listHash(f: ListFilters): string {
  const text = filterParams(f).toString();
  return `#/${text ? `?${text}` : ""}`;
}

/** U3: the API path of a list page. */
export function listQuery(f: ListFilters, limit: number): string {
  const p = filterParams(f);
  p.set("limit", String(limit));
  return `/api/executions?${p.toString()}`;
}

/** The filters after a click on a column's sort: the same column flips its order. */
export function toggleSort(f: ListFilters, sort: Sort): ListFilters {
  const order = f.sort === sort && (f.order ?? "asc") === "asc" ? "desc" : "asc";
  return { ...f, sort, order, after: "" };
}
