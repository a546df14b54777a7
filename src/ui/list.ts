/**
 * `GET /api/executions`: a page of executions, sorted and filtered, from one store `list` call.
 *
 * Query (api-types.ts `ListAnswer`): `status=a,b` (any of), `flow=f`, `q=text` (an id, or the
 * start of ids), `principal=p`, `minCostUsd=n`, `createdFromMs=n`, `createdToMs=n`,
 * `sort=id|created|updated|cost`, `order=asc|desc`, `after=<next of the previous page>`,
 * `limit` (1..200, default 50). Answer: `{ executions: ListRow[], next, nowMs }`; `next` is null
 * on the last page, `nowMs` the runtime clock's time.
 *
 * Invariants (tests cite L1..L4):
 * L1. One page costs one `store.list` of at most `limit + 1` rows (the extra row only says
 *     whether there is a next page), whatever the number of executions, plus a read of each
 *     shown log, so that one that cannot be read shows with its LogCorruptError (issue 21
 *     item 3; store/log-errors.ts).
 * L2. `q` matches ids that start with it (the store's `idPrefix`, S25), in whatever sort; in id
 *     order the id equal to it comes first. Text that cannot start an id matches nothing.
 * L3. A malformed parameter (status, sort, order, a number, limit, a cursor that is not one of
 *     this sort and order) is a 400 naming it; nothing is read.
 * L4. `next` is opaque: the sort, the order, and the last row's sort key and id (the keyset of
 *     store S25), so paging by it returns every matching row once, ties included, however the
 *     rows are sorted; a row deleted meanwhile does not break it.
 */
import { EXECUTION_STATUSES, type ExecutionStatus } from "../kernel/events.ts";
import { LIST_SORTS, listKeyOf } from "../store/list-query.ts";
import { withLogErrors } from "../store/log-errors.ts";
import type { ListQuery, ListSort, Store } from "../store/spi.ts";
import type { ListAnswer } from "./api-types.ts";
import { HttpRefusal } from "./http.ts";

export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 200;

/** The characters of an id (kernel/ids.ts), all ASCII below 0x7f. */
const ID_TEXT = /^[A-Za-z0-9][A-Za-z0-9._:~#@/+=-]*$/;

export async function listPage(
  store: Store,
  params: URLSearchParams,
  nowMs: number,
): Promise<ListAnswer> {
  const query = queryOf(params);
  const q = params.get("q")?.trim() ?? "";
  if (q !== "" && !ID_TEXT.test(q)) return { executions: [], next: null, nowMs };
  if (q !== "") query.idPrefix = q;
  const limit = query.limit ?? DEFAULT_PAGE;
  const rows = await store.list({ ...query, limit: limit + 1 });
  const executions = await withLogErrors(store, rows.slice(0, limit));
  const last = executions[executions.length - 1];
  const next =
    rows.length > limit && last
      ? cursorOf(query, listKeyOf(last, query.sort), last.executionId)
      : null;
  return { executions, next, nowMs };
}

const refuse = (message: string): never => {
  throw new HttpRefusal(400, "LOOM_INVALID_INPUT", message);
};

/** L3: the store query the parameters say, or a 400 naming the first malformed one. */
function queryOf(params: URLSearchParams): ListQuery {
  const query: ListQuery = {};
  const text = (name: string): string | undefined => {
    const v = params.get(name)?.trim();
    return v === undefined || v === "" ? undefined : v;
  };
  const status = text("status");
  if (status !== undefined) {
    const names = status.split(",").map((s) => s.trim());
    const unknown = names.filter((s) => !(EXECUTION_STATUSES as readonly string[]).includes(s));
    if (unknown.length > 0) {
      refuse(
        `unknown status ${JSON.stringify(unknown[0])} (known: ${EXECUTION_STATUSES.join(", ")})`,
      );
    }
    query.status = names as ExecutionStatus[];
  }
  const flow = text("flow");
  if (flow !== undefined) query.flow = flow;
  const principal = text("principal");
  if (principal !== undefined) query.principal = principal;
  const sort = text("sort");
  if (sort !== undefined) {
    if (!(LIST_SORTS as readonly string[]).includes(sort)) {
      refuse(`sort must be one of ${LIST_SORTS.join(", ")}`);
    }
    query.sort = sort as ListSort;
  }
  const order = text("order");
  if (order !== undefined) {
    if (order !== "asc" && order !== "desc") refuse("order must be asc or desc");
    query.order = order as "asc" | "desc";
  }
  const minCost = number(text("minCostUsd"), "minCostUsd", /^\d{1,15}(\.\d{1,15})?$/);
  if (minCost !== undefined) query.minCostUsd = minCost;
  const from = number(text("createdFromMs"), "createdFromMs", /^\d{1,15}$/);
  if (from !== undefined) query.createdFromMs = from;
  const to = number(text("createdToMs"), "createdToMs", /^\d{1,15}$/);
  if (to !== undefined) query.createdToMs = to;
  const limit = params.get("limit");
  if (limit !== null) {
    const n = /^\d{1,6}$/.test(limit) ? Number(limit) : 0;
    if (n < 1 || n > MAX_PAGE) refuse(`limit must be 1 to ${MAX_PAGE}`);
    query.limit = n;
  }
  const after = text("after");
  if (after !== undefined) Object.assign(query, afterOf(query, after));
  return query;
}

function number(v: string | undefined, name: string, form: RegExp): number | undefined {
  if (v === undefined) return undefined;
  if (!form.test(v)) refuse(`${name} must be a number >= 0 (milliseconds, or US dollars)`);
  return Number(v);
}

/** L4: the cursor after the row with sort key `key` and id `id`, in `query`'s sort and order. */
export function cursorOf(
  query: Pick<ListQuery, "sort" | "order">,
  key: number,
  id: string,
): string {
  const body = JSON.stringify([query.sort ?? "id", query.order ?? "asc", key, id]);
  return Buffer.from(body, "utf8").toString("base64url");
}

/** L3, L4: the store's keyset of a cursor this sort and order made; a 400 for anything else. */
function afterOf(query: ListQuery, after: string): Pick<ListQuery, "afterId" | "afterKey"> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(after, "base64url").toString("utf8"));
  } catch {
    parsed = undefined;
  }
  const [sort, order, key, id] = Array.isArray(parsed) ? (parsed as unknown[]) : [];
  const fits =
    Array.isArray(parsed) &&
    parsed.length === 4 &&
    sort === (query.sort ?? "id") &&
    order === (query.order ?? "asc") &&
    typeof key === "number" &&
    Number.isFinite(key) &&
    (sort === "cost" || Number.isSafeInteger(key)) &&
    typeof id === "string" &&
    ID_TEXT.test(id);
  if (!fits) refuse("after must be the next cursor of a page of the same sort and order");
  return (query.sort ?? "id") === "id"
    ? { afterId: id as string }
    : { afterId: id as string, afterKey: key as number };
}
