/**
 * `GET /api/executions`: a page of executions, in id order, from one store `list` call.
 *
 * Query: `status=a,b` (any of), `flow=f`, `q=text` (an id, or the start of ids), `after=<id>`
 * (the page after that id: `next` of the previous page), `limit` (1..200, default 50).
 * Answer: `{ executions: ExecutionSummary[], next: string | null }`; `next` is null on the
 * last page.
 *
 * Invariants (tests cite L1..L3):
 * L1. One page costs one `store.list` of at most `limit + 1` rows (the extra row only says
 *     whether there is a next page), whatever the number of executions, plus a read of each
 *     shown log, so that one that cannot be read shows with its LogCorruptError (issue 21
 *     item 3; store/log-errors.ts).
 * L2. `q` matches ids that start with it, the id equal to it first (ids are ordered by their
 *     bytes in every store, so the matches are one contiguous run from `q` on). Text that
 *     cannot start an id matches nothing.
 * L3. A malformed `status` or `limit` is a 400 naming it; nothing is read.
 */
import { EXECUTION_STATUSES, type ExecutionStatus } from "../kernel/events.ts";
import { withLogErrors } from "../store/log-errors.ts";
import type { ExecutionSummary, ListQuery, Store } from "../store/spi.ts";
import { HttpRefusal } from "./http.ts";

export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 200;

/** The characters of an id (kernel/ids.ts), all ASCII below 0x7f. */
const ID_TEXT = /^[A-Za-z0-9][A-Za-z0-9._:~#@/+=-]*$/;

export interface ListPage {
  executions: ExecutionSummary[];
  next: string | null;
}

export async function listPage(store: Store, params: URLSearchParams): Promise<ListPage> {
  const query = queryOf(params);
  const q = params.get("q")?.trim() ?? "";
  const after = params.get("after") ?? undefined;
  if (q !== "" && !ID_TEXT.test(q)) return { executions: [], next: null };
  const from = q === "" || (after !== undefined && after >= q) ? after : justBefore(q);
  const limit = query.limit ?? DEFAULT_PAGE;
  const rows = await store.list({ ...query, limit: limit + 1, ...(from ? { afterId: from } : {}) });
  const matching = q === "" ? rows : takeWhile(rows, (r) => r.executionId.startsWith(q));
  const executions = await withLogErrors(store, matching.slice(0, limit));
  const more = matching.length > limit;
  return {
    executions,
    next: more ? (executions[executions.length - 1]?.executionId ?? null) : null,
  };
}

/** L3 */
function queryOf(params: URLSearchParams): ListQuery {
  const query: ListQuery = {};
  const status = params.get("status");
  if (status !== null && status.trim() !== "") {
    const names = status.split(",").map((s) => s.trim());
    const unknown = names.filter((s) => !(EXECUTION_STATUSES as readonly string[]).includes(s));
    if (unknown.length > 0) {
      throw new HttpRefusal(
        400,
        "LOOM_INVALID_INPUT",
        `unknown status ${JSON.stringify(unknown[0])} (known: ${EXECUTION_STATUSES.join(", ")})`,
      );
    }
    query.status = names as ExecutionStatus[];
  }
  const flow = params.get("flow");
  if (flow !== null && flow.trim() !== "") query.flow = flow.trim();
  const limit = params.get("limit");
  if (limit !== null) {
    const n = /^\d{1,6}$/.test(limit) ? Number(limit) : 0;
    if (n < 1 || n > MAX_PAGE) {
      throw new HttpRefusal(400, "LOOM_INVALID_INPUT", `limit must be 1 to ${MAX_PAGE}`);
    }
    query.limit = n;
  }
  return query;
}

/**
 * The greatest text below `q` that no id lies strictly between it and `q` (L2): `q` with its
 * last character one lower, followed by DEL (0x7f), which sorts after every id character.
 */
export function justBefore(q: string): string {
  const last = q.charCodeAt(q.length - 1);
  return `${q.slice(0, -1)}${String.fromCharCode(last - 1)}\u007f`;
}

function takeWhile<T>(xs: readonly T[], ok: (x: T) => boolean): T[] {
  const out: T[] = [];
  for (const x of xs) {
    if (!ok(x)) break;
    out.push(x);
  }
  return out;
}
