/**
 * The charts of an execution's page. The timeline is an SVG with one row per call
 * (analytics/bars.ts): steps as bars from their first start to their end (growing up to now
 * while they run), sleeps, suspends, receives and child waits as bars of their own colour, and
 * markers for cancels and refused quotas; each row opens its call's panel on a click or on
 * Enter. Resources are one meter per dimension, spent against the budget's limit.
 */
import type { Bar, BarsView } from "../../analytics/bars.ts";
import type { BudgetUsage, UsageRow } from "../../analytics/resource-usage.ts";
import { h, onActivate, svg, type Kid } from "./dom.ts";
import { fmtDuration, meterText } from "./format.ts";

const MAX_BARS_DRAWN = 400;
const KIND_WORD: Record<Bar["kind"], string> = {
  step: "step",
  sleep: "sleep",
  suspend: "suspend",
  receive: "receive",
  child: "child wait",
};
const W = 1000;
const LABEL_W = 230;
const ROW = 22;
const TOP = 26;
const RIGHT = 16;

function barLabel(b: Bar): string {
  const plain =
    b.kind === "step" || b.name === b.kind || (b.kind === "child" && b.name === "awaitChild");
  if (plain && b.kind !== "child") return b.name;
  return plain ? KIND_WORD[b.kind] : `${b.name} (${KIND_WORD[b.kind]})`;
}

function barRow(b: Bar, y: number, x: (ms: number) => number, nowOffsetMs: number): SVGElement {
  const running = b.endMs === null;
  const end = b.endMs ?? Math.max(b.startMs, nowOffsetMs);
  const x0 = x(b.startMs);
  const width = Math.max(3, x(end) - x0);
  const label = barLabel(b);
  const tip =
    `${label} [${b.callId}]: ${b.status}${running ? ", for " : ", took "}${fmtDuration(end - b.startMs)}` +
    (b.attempts > 1 ? `, ${b.attempts} attempts` : "") +
    (b.compacted ? " (compacted: end unknown)" : "");
  const g = svg("g", {
    class: "row",
    "data-testid": b.kind === "step" ? "step-bar" : "wait-bar",
    "data-kind": b.kind,
    "data-status": b.status,
    "data-call-id": b.callId,
    "data-running": running ? "true" : "false",
    tabindex: 0,
    role: "button",
    "aria-label": `Open ${tip}`,
  });
  g.append(svg("title", {}, tip));
  // The whole row takes the click, not only the label's glyphs and the bar.
  g.append(svg("rect", { class: "hit", x: 0, y, width: W, height: ROW, fill: "transparent" }));
  g.append(
    svg(
      "text",
      { class: "label", x: 4, y: y + 14 },
      label.length > 34 ? `${label.slice(0, 33)}…` : label,
    ),
  );
  if (b.wakeMs !== undefined && running) {
    g.append(
      svg("line", { class: "wakeline", x1: x0 + width, x2: x(b.wakeMs), y1: y + 9, y2: y + 9 }),
    );
  }
  g.append(
    svg("rect", {
      class: `bar ${b.kind} ${b.status}${running ? " running" : ""}`,
      x: x0,
      y: y + 3,
      width,
      height: ROW - 8,
      rx: 3,
    }),
  );
  return g;
}

function timelineSvg(
  view: BarsView,
  nowOffsetMs: number,
  live: boolean,
  open: (callId: string) => void,
): SVGElement {
  const bars = view.bars.slice(0, MAX_BARS_DRAWN);
  let span = Math.max(1, view.lastMs);
  if (live) span = Math.max(span, nowOffsetMs);
  for (const b of bars) if (b.endMs !== null) span = Math.max(span, b.endMs);
  const x = (ms: number): number =>
    LABEL_W + (Math.max(0, Math.min(ms, span)) / span) * (W - LABEL_W - RIGHT);
  const height = TOP + Math.max(1, bars.length) * ROW + 8;
  const root = svg("svg", {
    viewBox: `0 0 ${W} ${height}`,
    role: "group",
    "aria-label": `Timeline of ${view.bars.length} calls over ${fmtDuration(span)}`,
  });
  for (let i = 0; i <= 5; i++) {
    const gx = x((span * i) / 5);
    const anchor = i === 0 ? "start" : i === 5 ? "end" : "middle";
    root.append(svg("line", { class: "grid", x1: gx, x2: gx, y1: TOP - 6, y2: height - 4 }));
    root.append(
      svg(
        "text",
        { class: "axis", x: gx, y: 12, "text-anchor": anchor },
        fmtDuration((span * i) / 5),
      ),
    );
  }
  bars.forEach((b, i) => {
    const row = barRow(b, TOP + i * ROW, x, nowOffsetMs);
    onActivate(row, () => open(b.callId));
    root.append(row);
  });
  for (const m of view.markers) {
    const mx = x(m.atMs);
    const g = svg("g", { class: "marker", "data-testid": "marker", "data-kind": m.kind });
    g.append(svg("title", {}, `${m.kind} at ${fmtDuration(m.atMs)}: ${m.text}`));
    g.append(svg("line", { x1: mx, x2: mx, y1: TOP - 4, y2: height - 4 }));
    g.append(
      svg("path", { d: `M${mx - 5} ${TOP - 10} L${mx + 5} ${TOP - 10} L${mx} ${TOP - 3} Z` }),
    );
    root.append(g);
  }
  return root;
}

/** The timeline's SVG, its notes and legend; `open` opens a call's panel. */
export function timelineSection(
  view: BarsView,
  nowOffsetMs: number,
  live: boolean,
  open: (callId: string) => void,
): Kid[] {
  const out: Kid[] = [];
  if (view.bars.length === 0 && view.markers.length === 0) {
    out.push(h("p", { class: "muted" }, "No calls yet."));
  } else {
    out.push(timelineSvg(view, nowOffsetMs, live, open));
  }
  if (view.bars.length > MAX_BARS_DRAWN) {
    out.push(
      h(
        "p",
        { class: "muted" },
        `The first ${MAX_BARS_DRAWN} of ${view.bars.length} calls are drawn.`,
      ),
    );
  }
  if (view.partial) {
    out.push(
      h(
        "p",
        { class: "muted" },
        "The log was compacted: calls before the gap are known from the state only.",
      ),
    );
  }
  const kinds = ["step", "sleep", "suspend", "receive", "child"] as const;
  out.push(
    h(
      "div",
      { class: "legend", "aria-hidden": "true" },
      kinds.map((k) => h("span", {}, h("span", { class: `swatch ${k}` }), KIND_WORD[k])),
      h("span", {}, h("span", { class: "swatch marker" }), "cancel / quota exceeded"),
    ),
  );
  const markers = view.markers.map((m) =>
    h("li", {}, `${m.kind} at +${fmtDuration(m.atMs)}: ${m.text}`),
  );
  if (markers.length > 0) out.push(h("ul", { "aria-label": "Markers" }, markers));
  return out;
}

function meterRow(row: UsageRow): HTMLElement {
  const name =
    row.dimension === "tokens" && row.tokens
      ? `tokens (${row.tokens.input} in / ${row.tokens.output} out)`
      : row.dimension;
  const used = row.spent + (row.held ?? 0);
  const text = meterText(row);
  let track: HTMLElement = h("span");
  if (typeof row.limit === "number") {
    const limit = row.limit;
    const pct = limit > 0 ? Math.min(100, (used / limit) * 100) : 100;
    const level = row.exceeded || used >= limit ? " over" : pct >= 80 ? " warn" : "";
    const fill = h("div", { class: `meter-fill${level}` });
    fill.style.width = `${pct}%`;
    track = h(
      "div",
      {
        class: "meter-track",
        role: "meter",
        "aria-label": row.dimension,
        "aria-valuemin": 0,
        "aria-valuemax": limit,
        "aria-valuenow": Math.min(used, limit),
        "aria-valuetext": text,
      },
      fill,
    );
  }
  return h(
    "div",
    { class: "meter", "data-testid": "resource", "data-dimension": row.dimension },
    h("span", { class: "mono" }, name),
    track,
    h("span", {}, text),
  );
}

export function resourcesSection(usages: readonly BudgetUsage[]): Kid[] {
  const out: Kid[] = [];
  for (const u of usages) {
    if (u.budget !== "execution" || usages.length > 1) {
      out.push(
        h("h3", {}, u.budget === "execution" ? "Execution budget" : `Nested budget ${u.budget}`),
      );
    }
    if (u.rows.length === 0) out.push(h("p", { class: "muted" }, "Nothing metered, no budget."));
    for (const row of u.rows) out.push(meterRow(row));
  }
  return out;
}
