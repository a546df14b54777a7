/**
 * Flow control (`#/flow-control`, api-types.ts FlowControlAnswer): each queue with its limits,
 * the slots held (in all and by key) and its waiters in admission order, each with its 1-based
 * position and expected wait; each rate limiter with its window's charges against its limits,
 * the calls in flight, a block's end, and its waiters. Limits the dashboard's runtime does not
 * know show as "unknown" (runtime/verbs-flow-control.ts FV2). Fetched again every few seconds
 * while the tab is visible; an error the API answers is shown instead.
 */
import { formatWait } from "../../analytics/waits.ts";
import type { FlowControlAnswer, LimiterRow, QueueRow } from "../api-types.ts";
import { api, errorBox } from "./api.ts";
import { fill, h, mainEl, type Kid } from "./dom.ts";
import { fmtAgo, fmtDuration } from "./format.ts";
import { execLink } from "./widgets.ts";

const REFRESH_MS = 3000;

const muted = (text: string): HTMLElement => h("span", { class: "muted" }, text);

function table(label: string, testid: string, heads: string[], rows: Kid[]): HTMLElement {
  return h(
    "table",
    { "aria-label": label, "data-testid": testid },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        heads.map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    h("tbody", {}, rows),
  );
}

function limitsText(q: QueueRow): string {
  if (q.limits === undefined) return "limits unknown here";
  const parts = [
    q.limits.concurrency === undefined ? "no limit" : `${q.limits.concurrency} at once`,
    q.limits.keyConcurrency === undefined ? "" : `${q.limits.keyConcurrency} per key`,
  ];
  return parts.filter((p) => p !== "").join(", ");
}

function queuePanel(q: QueueRow, nowMs: number): HTMLElement {
  const byKey = Object.entries(q.activeByKey).map(([k, n]) => `${k}: ${n}`);
  const waiters = q.waiting.map((w) =>
    h(
      "tr",
      { "data-testid": "queue-waiter", "data-id": w.executionId, "data-position": w.position },
      h("td", { class: "num" }, `#${w.position}`),
      h("td", { class: "id-cell" }, execLink(w.executionId)),
      h("td", {}, w.flow),
      h("td", {}, w.key ?? muted("-")),
      h("td", { class: "num" }, String(w.priority)),
      h("td", {}, fmtAgo(w.createdAtMs, nowMs)),
      h("td", { "data-testid": "expected" }, formatWait(w.expectedWaitMs)),
    ),
  );
  const more = q.waitingCount - q.waiting.length;
  return h(
    "section",
    {
      class: "panel",
      "data-testid": "queue",
      "data-name": q.name,
      "aria-label": `Queue ${q.name}`,
    },
    h("h3", {}, `Queue ${q.name}`),
    h(
      "p",
      {},
      `${limitsText(q)} · ${q.active} active`,
      byKey.length > 0 ? ` (${byKey.join(", ")})` : "",
      ` · ${q.waitingCount} waiting`,
      q.meanHoldMs === undefined ? "" : ` · a slot held ~${fmtDuration(q.meanHoldMs)}`,
    ),
    q.waiting.length === 0
      ? muted("Nothing waits.")
      : table(
          `Waiting in ${q.name}`,
          "queue-waiters",
          ["Pos", "Execution", "Flow", "Key", "Priority", "Since", "Expected"],
          waiters,
        ),
    more > 0 ? h("p", { class: "muted" }, `${more} more not shown.`) : null,
  );
}

/** "60 / 100" when the limit names the dimension, else the charge alone. */
function charge(used: number, max: number | undefined): string {
  return max === undefined ? used.toLocaleString("en-US") : `${used} / ${max}`;
}

function limiterRow(l: LimiterRow, nowMs: number): HTMLElement {
  const lim = l.limit;
  return h(
    "tr",
    { "data-testid": "limiter", "data-name": l.name },
    h("td", { class: "mono" }, l.name),
    h("td", {}, lim ? fmtDuration(lim.windowMs) : muted("limits unknown here")),
    h("td", { class: "num" }, charge(l.requests, lim?.requests)),
    h("td", { class: "num" }, charge(l.inputTokens, lim?.inputTokens)),
    h("td", { class: "num" }, charge(l.outputTokens, lim?.outputTokens)),
    h("td", { class: "num" }, charge(l.inFlight, lim?.concurrent)),
    h("td", {}, l.blockedUntilMs === undefined ? muted("-") : fmtAgo(l.blockedUntilMs, nowMs)),
    h(
      "td",
      {},
      l.waiting.length === 0
        ? muted("none")
        : h(
            "ul",
            { class: "plain" },
            l.waiting.map((w) =>
              h(
                "li",
                { "data-testid": "limiter-waiter", "data-id": w.executionId },
                `#${w.position} `,
                execLink(w.executionId),
                muted(` since ${fmtAgo(w.sinceMs, nowMs)}, ${formatWait(w.expectedWaitMs)}`),
              ),
            ),
          ),
    ),
  );
}

function draw(a: FlowControlAnswer): Kid[] {
  const heads = ["Limiter", "Window", "Requests", "Input tokens", "Output tokens", "In flight"];
  return [
    h("h2", {}, "Queues"),
    a.queues.length === 0
      ? h("p", { class: "muted" }, "No execution waits in a queue or holds a slot.")
      : a.queues.map((q) => queuePanel(q, a.nowMs)),
    h("h2", {}, "Rate limiters"),
    a.limiters.length === 0
      ? h("p", { class: "muted" }, "No rate limiter is named or used.")
      : h(
          "div",
          { class: "panel" },
          table(
            "Rate limiters",
            "limiters",
            [...heads, "Blocked until", "Waiting"],
            a.limiters.map((l) => limiterRow(l, a.nowMs)),
          ),
        ),
  ];
}

export function showFlowControl(): { dispose(): void } {
  document.title = "Flow control · Loom";
  let disposed = false;
  const where = h("div", { "data-testid": "flow-control" }, muted("Loading…"));
  mainEl().append(h("h1", {}, "Flow control"), where);
  const load = (): void => {
    api<FlowControlAnswer>("/api/flow-control")
      .then((a) => {
        if (!disposed) fill(where, draw(a));
      })
      .catch((err: unknown) => {
        if (!disposed) where.replaceChildren(errorBox(err));
        window.clearInterval(timer);
      });
  };
  load();
  const timer = window.setInterval(() => {
    if (document.visibilityState === "visible") load();
  }, REFRESH_MS);
  return {
    dispose() {
      disposed = true;
      window.clearInterval(timer);
    },
  };
}
