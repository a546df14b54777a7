/**
 * Client script, part 2: the executions list (`#/?status=a,b&flow=f&q=id&after=cursor`):
 * filters by status, flow and id (or its start), pages of 50 in id order, Previous and Next.
 * (A template literal: no backtick or dollar-brace in here.)
 */
export const CLIENT_LIST = String.raw`
/** Cursors of the pages before the one shown, for Previous (reset when the filters change). */
const pageTrail = [];

function listHash(filters) {
  const p = new URLSearchParams();
  if (filters.status && filters.status.length) p.set("status", filters.status.join(","));
  if (filters.flow) p.set("flow", filters.flow);
  if (filters.q) p.set("q", filters.q);
  if (filters.after) p.set("after", filters.after);
  const text = p.toString();
  return "#/" + (text ? "?" + text : "");
}

function showList(params) {
  document.title = "Executions · Loom";
  const filters = {
    status: (params.get("status") || "").split(",").filter((s) => STATUSES.includes(s)),
    flow: params.get("flow") || "",
    q: params.get("q") || "",
    after: params.get("after") || "",
  };
  if (!filters.after) pageTrail.length = 0;
  const form = h("form", { class: "filters panel", role: "search", "aria-label": "Filter executions" },
    h("fieldset", {},
      h("legend", {}, "Status"),
      STATUSES.map((st) => h("label", {},
        h("input", { type: "checkbox", name: "status", value: st, checked: filters.status.includes(st) }),
        " " + st))),
    h("label", { class: "field" }, "Flow",
      h("input", { type: "text", name: "flow", value: filters.flow, placeholder: "any flow", autocomplete: "off" })),
    h("label", { class: "field" }, "Execution id",
      h("input", { type: "search", name: "q", value: filters.q, placeholder: "an id or its start", autocomplete: "off" })),
    h("button", { type: "submit", class: "primary" }, "Apply"),
    h("button", { type: "button", onclick: () => { pageTrail.length = 0; location.hash = "#/"; } }, "Clear"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const data = new FormData(form);
    pageTrail.length = 0;
    const next = listHash({
      status: data.getAll("status").map(String),
      flow: String(data.get("flow") || "").trim(),
      q: String(data.get("q") || "").trim(),
    });
    if (location.hash === next) route();
    else location.hash = next;
  });
  const body = h("tbody", {}, h("tr", {}, h("td", { colspan: 6, class: "muted" }, "Loading…")));
  const table = h("table", { "aria-label": "Executions" },
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Execution"),
      h("th", { scope: "col" }, "Flow"),
      h("th", { scope: "col" }, "Status"),
      h("th", { scope: "col", class: "num" }, "Events"),
      h("th", { scope: "col" }, "Created"),
      h("th", { scope: "col" }, "Updated"))),
    body);
  const prev = h("button", { type: "button", disabled: !filters.after }, "← Previous");
  const next = h("button", { type: "button", disabled: true }, "Next →");
  const where = h("span", { class: "muted" }, "Page " + (pageTrail.length + 1));
  const status = h("p", { class: "muted", role: "status" });
  prev.addEventListener("click", () => {
    const cursor = pageTrail.pop() || "";
    location.hash = listHash(Object.assign({}, filters, { after: cursor }));
  });
  mainEl.append(h("h1", {}, "Executions"), form, h("section", { "aria-label": "Results" },
    status, h("div", { class: "panel" }, table), h("nav", { class: "pager", "aria-label": "Pages" }, prev, where, next)));

  const query = new URLSearchParams();
  if (filters.status.length) query.set("status", filters.status.join(","));
  if (filters.flow) query.set("flow", filters.flow);
  if (filters.q) query.set("q", filters.q);
  if (filters.after) query.set("after", filters.after);
  query.set("limit", "50");
  let disposed = false;
  api("/api/executions?" + query.toString()).then((page) => {
    if (disposed) return;
    body.replaceChildren();
    if (page.executions.length === 0) {
      body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No executions match.")));
    }
    for (const x of page.executions) {
      body.append(h("tr", { "data-testid": "execution-row", "data-id": x.executionId },
        h("td", { class: "id-cell mono" }, h("a", { href: execHref(x.executionId) }, x.executionId)),
        h("td", {}, x.flow),
        h("td", {}, badge(x.status, { "data-testid": "row-status" }),
          x.error ? h("span", { class: "badge failed", "data-testid": "row-error", title: x.error.message }, x.error.name) : null),
        h("td", { class: "num" }, String(x.head + 1)),
        h("td", {}, fmtTime(x.createdAtMs)),
        h("td", {}, fmtTime(x.updatedAtMs))));
    }
    status.textContent = page.executions.length + " shown" + (page.next ? "; more on the next page" : "");
    if (page.next) {
      next.disabled = false;
      next.addEventListener("click", () => {
        pageTrail.push(filters.after);
        location.hash = listHash(Object.assign({}, filters, { after: page.next }));
      });
    }
  }).catch((err) => {
    if (disposed) return;
    body.replaceChildren(h("tr", {}, h("td", { colspan: 6 }, errorBox(err))));
  });
  return { dispose() { disposed = true; } };
}
`;
