/**
 * The executions list (`#/?...`, router.ts U2): filters by status, flow, id, principal, least
 * cost and creation time, a sort by id, creation, update or cost either way, pages of 50 with
 * Previous and Next. It stays live: while the tab is visible the page shown is fetched again
 * every LIST_REFRESH_MS and its rows are updated in place (new executions appear, statuses
 * change) without a reload.
 */
import type { ListAnswer, ListRow } from "../api-types.ts";
import { api, errorBox } from "./api.ts";
import { h, mainEl } from "./dom.ts";
import { listFilterForm } from "./list-filters.ts";
import { fmtDuration } from "./format.ts";
import { listHash, listQuery, toggleSort, type ListFilters, type Sort } from "./router.ts";
import { badge, costEl, execLink, timeEl, waitingEl } from "./widgets.ts";

export const LIST_REFRESH_MS = 2000;
const PAGE_SIZE = 50;
const COLUMNS: { title: string; sort?: Sort; num?: true }[] = [
  { title: "Execution", sort: "id" },
  { title: "Flow" },
  { title: "Status" },
  { title: "Events", num: true },
  { title: "Cost", sort: "cost", num: true },
  { title: "Tokens", num: true },
  { title: "Created", sort: "created" },
  { title: "Updated", sort: "updated" },
];

/** Cursors of the pages before the one shown, for Previous (reset when the filters change). */
const pageTrail: string[] = [];

function cells(x: ListRow): HTMLElement[] {
  return [
    h("td", { class: "id-cell" }, execLink(x.executionId)),
    h("td", {}, x.flow, x.principal ? h("div", { class: "muted" }, x.principal) : null),
    h(
      "td",
      {},
      badge(x.status, undefined, { "data-testid": "row-status" }),
      x.error
        ? h(
            "span",
            { class: "badge failed", "data-testid": "row-error", title: x.error.message },
            // log-errors.ts E3: sealed with a key this dashboard does not have.
            x.error.code === "LOOM_CODEC_KEY" ? "sealed" : x.error.name,
          )
        : null,
      waitingEl(x.waiting),
    ),
    h("td", { class: "num" }, String(x.head + 1)),
    h("td", { class: "num", "data-testid": "row-cost" }, costEl(x.costUsd, x.costUnknown)),
    h(
      "td",
      { class: "num", "data-testid": "row-tokens" },
      x.tokens === undefined ? "-" : x.tokens.toLocaleString("en-US"),
    ),
    h("td", { "data-testid": "row-created" }, timeEl(x.createdAtMs)),
    h("td", { title: fmtDuration(x.updatedAtMs - x.createdAtMs) }, timeEl(x.updatedAtMs)),
  ];
}

function header(filters: ListFilters): HTMLElement {
  return h(
    "thead",
    {},
    h(
      "tr",
      {},
      COLUMNS.map((c) => {
        const sorted = c.sort !== undefined && filters.sort === c.sort;
        const dir = sorted ? (filters.order === "desc" ? "descending" : "ascending") : undefined;
        const attrs = { scope: "col", class: c.num ? "num" : "", "aria-sort": dir };
        if (c.sort === undefined) return h("th", attrs, c.title);
        const sort = c.sort;
        const arrow = sorted ? (filters.order === "desc" ? " ↓" : " ↑") : "";
        return h(
          "th",
          attrs,
          h(
            "button",
            {
              type: "button",
              class: "sort",
              "data-testid": `sort-${sort}`,
              onclick: () => (location.hash = listHash(toggleSort(filters, sort))),
            },
            c.title + arrow,
          ),
        );
      }),
    ),
  );
}

/** Puts `rows` in `body` in order, updating the row of an id already shown in place. */
function drawRows(body: HTMLElement, rows: readonly ListRow[]): void {
  const shown = new Map<string, HTMLElement>();
  for (const tr of body.querySelectorAll<HTMLElement>("tr[data-id]")) {
    shown.set(tr.dataset.id ?? "", tr);
  }
  const next = rows.map((x) => {
    const tr =
      shown.get(x.executionId) ??
      h("tr", { "data-testid": "execution-row", "data-id": x.executionId });
    tr.dataset.status = x.status;
    tr.replaceChildren(...cells(x));
    return tr;
  });
  if (next.length === 0) {
    body.replaceChildren(
      h("tr", {}, h("td", { colspan: COLUMNS.length, class: "muted" }, "No executions match.")),
    );
  } else {
    body.replaceChildren(...next);
  }
}

function pager(filters: ListFilters): { el: HTMLElement; setNext(cursor: string | null): void } {
  let nextCursor: string | null = null;
  const prev = h(
    "button",
    { type: "button", disabled: !filters.after, "data-testid": "page-prev" },
    "← Previous",
  );
  const next = h(
    "button",
    { type: "button", disabled: true, "data-testid": "page-next" },
    "Next →",
  );
  prev.addEventListener("click", () => {
    location.hash = listHash({ ...filters, after: pageTrail.pop() ?? "" });
  });
  next.addEventListener("click", () => {
    if (nextCursor === null) return;
    pageTrail.push(filters.after);
    location.hash = listHash({ ...filters, after: nextCursor });
  });
  const where = h("span", { class: "muted" }, `Page ${pageTrail.length + 1}`);
  return {
    el: h("nav", { class: "pager", "aria-label": "Pages" }, prev, where, next),
    setNext(cursor) {
      nextCursor = cursor;
      next.disabled = cursor === null;
    },
  };
}

export function showList(filters: ListFilters): { dispose(): void } {
  document.title = "Executions · Loom";
  if (!filters.after) pageTrail.length = 0;
  const loading = h("td", { colspan: COLUMNS.length, class: "muted" }, "Loading…");
  const body = h("tbody", {}, h("tr", {}, loading));
  const pages = pager(filters);
  const status = h("p", { class: "muted", role: "status", "data-testid": "list-status" });
  const problem = h("div");
  mainEl().append(
    h("h1", {}, "Executions"),
    listFilterForm(filters, () => (pageTrail.length = 0)),
    h(
      "section",
      { "aria-label": "Results" },
      status,
      problem,
      h(
        "div",
        { class: "panel" },
        h(
          "table",
          { "aria-label": "Executions", "data-testid": "executions" },
          header(filters),
          body,
        ),
      ),
      pages.el,
    ),
  );
  let disposed = false;
  let busy = false;
  const load = async (): Promise<void> => {
    if (busy) return;
    busy = true;
    try {
      const page = await api<ListAnswer>(listQuery(filters, PAGE_SIZE));
      if (disposed) return;
      problem.replaceChildren();
      drawRows(body, page.executions);
      pages.setNext(page.next);
      status.textContent = `${page.executions.length} shown${page.next ? "; more on the next page" : ""}`;
    } catch (err) {
      if (!disposed) problem.replaceChildren(errorBox(err));
      loading.textContent = "";
    } finally {
      busy = false;
    }
  };
  void load();
  const timer = window.setInterval(() => {
    if (document.visibilityState === "visible") void load();
  }, LIST_REFRESH_MS);
  return {
    dispose() {
      disposed = true;
      window.clearInterval(timer);
    },
  };
}
