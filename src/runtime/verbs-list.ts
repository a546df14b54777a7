/**
 * The public verb that lists executions (runtime.ts `list`): the store's list, or, for a caller
 * acting `as` a principal, only that principal's (ADR 0111; issue 22 item 6). Takes the runtime's
 * state (runtime-state.ts); runtime.ts's Runtime hands it in, and keeps the TSDoc users read.
 *
 * Invariant (tests cite it as LS1): `list({ as })` never returns an execution another principal
 * owns, nor one without an owner; without `as` it is the store's list, unchanged.
 */
import { InvalidInputError, isLoomError } from "../kernel/errors.ts";
import type { ExecutionSummary, ListQuery } from "../store/spi.ts";
import { loadStart } from "./load-state.ts";
import { checkedPrincipal } from "./runtime-support.ts";
import type { CallerOptions } from "./runtime-options.ts";
import type { RuntimeState } from "./runtime-state.ts";

/** What `list` takes: a store's query, and the caller (`as`) whose executions alone it lists. */
export type ListOptions = ListQuery & CallerOptions;

/** How many summaries `list({ as })` reads from the store at a time. */
const LIST_PAGE = 200;

/**
 * The executions `query` names (runtime.ts `list`). With `as`, only those that principal owns
 * (ADR 0111): each one's owner is read from its sequence 0 (or memory), a page at a time, until
 * `limit` are found. Without `as`, every one, as the store lists them (the operator's view).
 */
export async function list(s: RuntimeState, query: ListOptions = {}): Promise<ExecutionSummary[]> {
  if (query === null || typeof query !== "object") {
    throw new InvalidInputError("list options must be an object");
  }
  const { as, ...rest } = query;
  if (as === undefined) return s.store.list(rest);
  const principal = checkedPrincipal(as);
  const limit = rest.limit;
  if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 0)) {
    throw new InvalidInputError(`list limit must be an integer >= 0, got ${String(limit)}`);
  }
  const out: ExecutionSummary[] = [];
  let afterId = rest.afterId;
  while (limit === undefined || out.length < limit) {
    const page = await s.store.list({ ...rest, limit: LIST_PAGE, ...(afterId ? { afterId } : {}) });
    for (const x of page) {
      if ((await ownerOf(s, x.executionId)) !== principal) continue;
      out.push(x);
      if (limit !== undefined && out.length >= limit) break;
    }
    if (page.length < LIST_PAGE) break;
    afterId = page[page.length - 1]?.executionId;
  }
  return out;
}

/** The principal that owns `id` (its sequence 0), or none; a log that cannot be read, none. */
async function ownerOf(s: RuntimeState, id: string): Promise<string | undefined> {
  const held = s.runs.get(id)?.state;
  if (held) return held._principal;
  try {
    return (await loadStart(s.store, id))?._principal;
  } catch (e) {
    if (isLoomError(e, "LOOM_LOG_CORRUPT")) return undefined;
    throw e;
  }
}
