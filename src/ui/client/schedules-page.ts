/**
 * The schedules (`#/schedules`, api-types.ts SchedulesAnswer): each one's name, flow, cron and
 * time zone, its next occurrences, whether it is paused, and Pause or Resume (a read-only page
 * draws neither). An error the API answers is shown in place of the table.
 */
import type { ScheduleRow, SchedulesAnswer } from "../api-types.ts";
import { api, errorBox, errorText, post } from "./api.ts";
import { announce, h, isReadOnly, mainEl } from "./dom.ts";
import { fmtAgo } from "./format.ts";
import { timeEl } from "./widgets.ts";

const schedulePath = (name: string, verb: string): string =>
  `/api/schedules/${encodeURIComponent(name)}/${verb}`;

function row(s: ScheduleRow, nowMs: number, reload: () => void): HTMLElement {
  const verb = s.paused ? "resume" : "pause";
  const message = h("span", { class: "message", role: "status" });
  const button = isReadOnly()
    ? null
    : h(
        "button",
        { type: "button", class: "primary", "data-testid": `schedule-${verb}` },
        s.paused ? "Resume" : "Pause",
      );
  button?.addEventListener("click", () => {
    button.disabled = true;
    post(schedulePath(s.name, verb), {})
      .then(() => {
        announce(`${s.name} ${s.paused ? "resumed" : "paused"}`);
        reload();
      })
      .catch((err: unknown) => {
        message.textContent = errorText(err);
        message.className = "message error";
        button.disabled = false;
      });
  });
  return h(
    "tr",
    { "data-testid": "schedule-row", "data-name": s.name, "data-paused": String(s.paused) },
    h("td", { class: "mono" }, s.name),
    h("td", {}, s.flow),
    h("td", { class: "mono" }, s.cron),
    h("td", {}, s.timezone),
    h(
      "td",
      { "data-testid": "schedule-next" },
      s.paused
        ? h("span", { class: "badge paused" }, "paused")
        : h(
            "ul",
            { class: "plain" },
            s.next.slice(0, 3).map((ms) => h("li", {}, timeEl(ms), ` (${fmtAgo(ms, nowMs)})`)),
          ),
    ),
    h("td", {}, s.lastStartedMs === undefined ? "-" : timeEl(s.lastStartedMs)),
    h("td", {}, button, message),
  );
}

export function showSchedules(): { dispose(): void } {
  document.title = "Schedules · Loom";
  let disposed = false;
  const body = h("tbody", {}, h("tr", {}, h("td", { colspan: 7, class: "muted" }, "Loading…")));
  const where = h("div", { class: "panel" });
  const table = h(
    "table",
    { "aria-label": "Schedules", "data-testid": "schedules" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Name", "Flow", "Cron", "Time zone", "Next", "Last started", ""].map((t) =>
          h("th", { scope: "col" }, t),
        ),
      ),
    ),
    body,
  );
  where.append(table);
  mainEl().append(h("h1", {}, "Schedules"), where);
  const load = (): void => {
    api<SchedulesAnswer>("/api/schedules")
      .then((a) => {
        if (disposed) return;
        if (a.schedules.length === 0) {
          body.replaceChildren(
            h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No schedules.")),
          );
        } else {
          body.replaceChildren(...a.schedules.map((s) => row(s, a.nowMs, load)));
        }
      })
      .catch((err: unknown) => {
        if (!disposed) where.replaceChildren(errorBox(err));
      });
  };
  load();
  return {
    dispose() {
      disposed = true;
    },
  };
}
