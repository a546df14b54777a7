/**
 * The list's filter form: statuses, flow, id, principal, least cost, and a creation window
 * (the browser's local time, kept in the hash as epoch ms). Apply writes the hash (router.ts
 * U2); the list follows the hash.
 */
import { h } from "./dom.ts";
import { STATUSES } from "./format.ts";
import { emptyFilters, listHash, type ListFilters } from "./router.ts";

/** `datetime-local` text of epoch ms in the browser's zone, and back. */
function localInput(ms: number | undefined): string {
  if (ms === undefined) return "";
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000);
  return d.toISOString().slice(0, 16);
}
function msOfLocal(text: string): number | undefined {
  if (text.trim() === "") return undefined;
  const ms = new Date(text).getTime();
  return Number.isFinite(ms) ? ms : undefined;
}

function field(label: string, input: HTMLElement): HTMLElement {
  return h("label", { class: "field" }, label, input);
}

function text(name: string, value: string, placeholder: string, type = "text"): HTMLElement {
  return h("input", {
    type,
    name,
    value,
    placeholder,
    autocomplete: "off",
    "data-testid": `filter-${name}`,
  });
}

function statusBoxes(filters: ListFilters): HTMLElement {
  return h(
    "fieldset",
    {},
    h("legend", {}, "Status"),
    STATUSES.map((st) =>
      h(
        "label",
        {},
        h("input", {
          type: "checkbox",
          name: "status",
          value: st,
          checked: filters.status.includes(st),
        }),
        ` ${st}`,
      ),
    ),
  );
}

export function listFilterForm(filters: ListFilters, resetTrail: () => void): HTMLFormElement {
  const form = h(
    "form",
    { class: "filters panel", role: "search", "aria-label": "Filter executions" },
    statusBoxes(filters),
    field("Flow", text("flow", filters.flow, "any flow")),
    field("Execution id", text("q", filters.q, "an id or its start", "search")),
    field("Principal", text("principal", filters.principal, "anyone")),
    field(
      "Cost at least (USD)",
      text(
        "minCostUsd",
        filters.minCostUsd === undefined ? "" : String(filters.minCostUsd),
        "0",
        "number",
      ),
    ),
    field(
      "Created from",
      h("input", {
        type: "datetime-local",
        name: "createdFrom",
        value: localInput(filters.createdFromMs),
        "data-testid": "filter-createdFrom",
      }),
    ),
    field(
      "Created to",
      h("input", {
        type: "datetime-local",
        name: "createdTo",
        value: localInput(filters.createdToMs),
        "data-testid": "filter-createdTo",
      }),
    ),
    h("button", { type: "submit", class: "primary", "data-testid": "filter-apply" }, "Apply"),
    h(
      "button",
      {
        type: "button",
        onclick: () => {
          resetTrail();
          location.hash = "#/";
        },
      },
      "Clear",
    ),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    resetTrail();
    const hash = listHash(filtersOfForm(form, filters));
    if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = hash;
  });
  return form;
}

/** The filters the form says, keeping the sort of the list shown (router.ts U2). */
function filtersOfForm(form: HTMLFormElement, filters: ListFilters): ListFilters {
  const data = new FormData(form);
  const get = (name: string): string => {
    const v = data.get(name);
    return typeof v === "string" ? v.trim() : "";
  };
  const next: ListFilters = {
    ...emptyFilters(),
    status: data
      .getAll("status")
      .map(String)
      .filter((s): s is (typeof STATUSES)[number] => (STATUSES as readonly string[]).includes(s)),
    flow: get("flow"),
    q: get("q"),
    principal: get("principal"),
    ...(filters.sort ? { sort: filters.sort } : {}),
    ...(filters.order ? { order: filters.order } : {}),
  };
  const minCost = get("minCostUsd") === "" ? undefined : Number(get("minCostUsd"));
  if (minCost !== undefined && Number.isFinite(minCost)) next.minCostUsd = minCost;
  const from = msOfLocal(get("createdFrom"));
  const to = msOfLocal(get("createdTo"));
  if (from !== undefined) next.createdFromMs = from;
  if (to !== undefined) next.createdToMs = to;
  return next;
}
