/**
 * Client script, part 3: the charts of an execution page. The timeline is an SVG with one row
 * per call (analytics/bars.ts): steps as bars from their first start to their end (growing up
 * to now while they run), sleeps, suspends, receives and child waits as bars of their own
 * colour, and markers for cancels and refused quotas. Resources are one meter per dimension,
 * spent against the budget's limit. (A template literal: no backtick or dollar-brace in here.)
 */
export const CLIENT_CHARTS = String.raw`
const MAX_BARS_DRAWN = 400;
const KIND_WORD = { step: "step", sleep: "sleep", suspend: "suspend", receive: "receive", child: "child wait" };

function timelineSvg(view, nowOffsetMs, live) {
  const bars = view.bars.slice(0, MAX_BARS_DRAWN);
  const W = 1000, LABEL_W = 230, ROW = 22, TOP = 26, RIGHT = 16;
  let span = Math.max(1, view.lastMs);
  if (live) span = Math.max(span, nowOffsetMs);
  for (const b of bars) if (b.endMs !== null) span = Math.max(span, b.endMs);
  const x = (ms) => LABEL_W + (Math.max(0, Math.min(ms, span)) / span) * (W - LABEL_W - RIGHT);
  const height = TOP + Math.max(1, bars.length) * ROW + 8;
  const root = svg("svg", {
    viewBox: "0 0 " + W + " " + height,
    role: "img",
    "aria-label": "Timeline of " + view.bars.length + " calls over " + fmtDuration(span),
  });
  for (let i = 0; i <= 5; i++) {
    const ms = (span * i) / 5;
    const gx = x(ms);
    root.append(svg("line", { class: "grid", x1: gx, x2: gx, y1: TOP - 6, y2: height - 4 }));
    root.append(svg("text", { class: "axis", x: gx, y: 12, "text-anchor": i === 0 ? "start" : i === 5 ? "end" : "middle" }, fmtDuration(ms)));
  }
  bars.forEach((b, i) => {
    const y = TOP + i * ROW;
    const running = b.endMs === null;
    const end = running ? Math.max(b.startMs, nowOffsetMs) : b.endMs;
    const x0 = x(b.startMs);
    const width = Math.max(3, x(end) - x0);
    const plain = b.kind === "step" || b.name === b.kind || (b.kind === "child" && b.name === "awaitChild");
    const label = plain && b.kind !== "child" ? b.name : plain ? KIND_WORD[b.kind] : b.name + " (" + KIND_WORD[b.kind] + ")";
    const took = fmtDuration(end - b.startMs);
    const tip = label + " [" + b.callId + "]: " + b.status + (running ? ", for " : ", took ") + took +
      (b.attempts > 1 ? ", " + b.attempts + " attempts" : "") + (b.compacted ? " (compacted: end unknown)" : "");
    const g = svg("g", {
      class: "row",
      "data-testid": b.kind === "step" ? "step-bar" : "wait-bar",
      "data-kind": b.kind,
      "data-status": b.status,
      "data-call-id": b.callId,
      "data-running": running ? "true" : "false",
    });
    g.append(svg("title", {}, tip));
    g.append(svg("text", { class: "label", x: 4, y: y + 14 }, label.length > 34 ? label.slice(0, 33) + "…" : label));
    if (b.wakeMs !== undefined && running) {
      g.append(svg("line", { class: "wakeline", x1: x0 + width, x2: x(b.wakeMs), y1: y + 9, y2: y + 9 }));
    }
    g.append(svg("rect", {
      class: "bar " + b.kind + " " + b.status + (running ? " running" : ""),
      x: x0, y: y + 3, width: width, height: ROW - 8, rx: 3,
    }));
    root.append(g);
  });
  for (const m of view.markers) {
    const mx = x(m.atMs);
    const g = svg("g", { class: "marker", "data-testid": "marker", "data-kind": m.kind });
    g.append(svg("title", {}, m.kind + " at " + fmtDuration(m.atMs) + ": " + m.text));
    g.append(svg("line", { x1: mx, x2: mx, y1: TOP - 4, y2: height - 4 }));
    g.append(svg("path", { d: "M" + (mx - 5) + " " + (TOP - 10) + " L" + (mx + 5) + " " + (TOP - 10) + " L" + mx + " " + (TOP - 3) + " Z" }));
    root.append(g);
  }
  return root;
}

function timelineSection(view, nowOffsetMs, live) {
  const out = [];
  if (view.bars.length === 0 && view.markers.length === 0) {
    out.push(h("p", { class: "muted" }, "No calls yet."));
  } else {
    out.push(timelineSvg(view, nowOffsetMs, live));
  }
  if (view.bars.length > MAX_BARS_DRAWN) {
    out.push(h("p", { class: "muted" }, "The first " + MAX_BARS_DRAWN + " of " + view.bars.length + " calls are drawn."));
  }
  if (view.partial) out.push(h("p", { class: "muted" }, "The log was compacted: calls before the gap are known from the state only."));
  out.push(h("div", { class: "legend", "aria-hidden": "true" },
    ["step", "sleep", "suspend", "receive", "child"].map((k) => h("span", {}, h("span", { class: "swatch " + k }), KIND_WORD[k])),
    h("span", {}, h("span", { class: "swatch marker" }), "cancel / quota exceeded")));
  const markers = view.markers.map((m) => h("li", {}, m.kind + " at +" + fmtDuration(m.atMs) + ": " + m.text));
  if (markers.length) out.push(h("ul", { "aria-label": "Markers" }, markers));
  return out;
}

function meterRow(row) {
  const name = row.dimension === "tokens" && row.tokens
    ? "tokens (" + row.tokens.input + " in / " + row.tokens.output + " out)" : row.dimension;
  const used = row.spent + (row.held || 0);
  const hasLimit = typeof row.limit === "number";
  // Some calls could not be priced: what was spent is a lower bound (resource-usage.ts U5).
  const text = (row.costUnknown ? "≥ " : "") + fmtAmount(row.dimension, row.spent) +
    (row.costUnknown ? " (some calls could not be priced)" : "") +
    (row.held ? " + " + fmtAmount(row.dimension, row.held) + " held by children" : "") +
    (hasLimit ? " of " + fmtAmount(row.dimension, row.limit) : " (no limit)") +
    (row.exceeded ? " — exceeded" : "");
  let track = h("span");
  if (hasLimit) {
    const pct = row.limit > 0 ? Math.min(100, (used / row.limit) * 100) : 100;
    const level = row.exceeded || used >= row.limit ? " over" : pct >= 80 ? " warn" : "";
    const fill = h("div", { class: "meter-fill" + level });
    fill.style.width = pct + "%";
    track = h("div", {
      class: "meter-track", role: "meter", "aria-label": row.dimension,
      "aria-valuemin": 0, "aria-valuemax": row.limit, "aria-valuenow": Math.min(used, row.limit),
      "aria-valuetext": text,
    }, fill);
  }
  return h("div", { class: "meter", "data-testid": "resource", "data-dimension": row.dimension },
    h("span", { class: "mono" }, name), track, h("span", {}, text));
}

function resourcesSection(usages) {
  const out = [];
  for (const u of usages) {
    if (u.budget !== "execution" || usages.length > 1) {
      out.push(h("h3", {}, u.budget === "execution" ? "Execution budget" : "Nested budget " + u.budget));
    }
    if (u.rows.length === 0) out.push(h("p", { class: "muted" }, "Nothing metered, no budget."));
    for (const row of u.rows) out.push(meterRow(row));
  }
  return out;
}
`;
