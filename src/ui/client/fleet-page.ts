/**
 * The fleet (`#/fleet`, api-types.ts FleetAnswer): each member, the flows it runs, its last
 * heartbeat as a time ago, and the leases it holds, linked to their executions. Fetched again
 * every few seconds while the tab is visible; an error the API answers is shown instead.
 */
import type { FleetAnswer, FleetMemberRow } from "../api-types.ts";
import { api, errorBox } from "./api.ts";
import { h, mainEl } from "./dom.ts";
import { fmtAgo } from "./format.ts";
import { execLink, timeEl } from "./widgets.ts";

const FLEET_REFRESH_MS = 3000;

function row(m: FleetMemberRow, nowMs: number): HTMLElement {
  return h(
    "tr",
    { "data-testid": "fleet-member", "data-owner": m.owner },
    h(
      "td",
      { class: "mono" },
      m.owner,
      m.host
        ? h("div", { class: "muted" }, `${m.host}${m.pid === undefined ? "" : ` pid ${m.pid}`}`)
        : null,
    ),
    h("td", {}, m.flows.length > 0 ? m.flows.join(", ") : h("span", { class: "muted" }, "none")),
    h("td", {}, timeEl(m.startedAtMs)),
    h(
      "td",
      { "data-testid": "heartbeat" },
      h(
        "span",
        { title: new Date(m.lastHeartbeatMs).toISOString() },
        fmtAgo(m.lastHeartbeatMs, nowMs),
      ),
    ),
    h(
      "td",
      { "data-testid": "leases" },
      m.leases.length === 0
        ? h("span", { class: "muted" }, "none")
        : h(
            "ul",
            { class: "plain" },
            m.leases.map((l) =>
              h(
                "li",
                {},
                execLink(l.executionId, { "data-testid": "lease" }),
                h(
                  "span",
                  { class: "muted" },
                  ` fence ${l.fence}, expires ${fmtAgo(l.expiresAtMs, nowMs)}`,
                ),
              ),
            ),
          ),
    ),
  );
}

export function showFleet(): { dispose(): void } {
  document.title = "Fleet · Loom";
  let disposed = false;
  const body = h("tbody", {}, h("tr", {}, h("td", { colspan: 5, class: "muted" }, "Loading…")));
  const where = h(
    "div",
    { class: "panel" },
    h(
      "table",
      { "aria-label": "Fleet", "data-testid": "fleet" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Member", "Flows", "Started", "Last heartbeat", "Leases"].map((t) =>
            h("th", { scope: "col" }, t),
          ),
        ),
      ),
      body,
    ),
  );
  mainEl().append(h("h1", {}, "Fleet"), where);
  const load = (): void => {
    api<FleetAnswer>("/api/fleet")
      .then((a) => {
        if (disposed) return;
        body.replaceChildren(
          ...(a.members.length === 0
            ? [h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No members."))]
            : a.members.map((m) => row(m, a.nowMs))),
        );
      })
      .catch((err: unknown) => {
        if (!disposed) where.replaceChildren(errorBox(err));
        window.clearInterval(timer);
      });
  };
  load();
  const timer = window.setInterval(() => {
    if (document.visibilityState === "visible") load();
  }, FLEET_REFRESH_MS);
  return {
    dispose() {
      disposed = true;
      window.clearInterval(timer);
    },
  };
}
