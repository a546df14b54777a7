/**
 * An execution's page (`#/x/<id>`): its input and output (or error) first, its status and
 * facts, lineage, the actions that apply, the timeline whose calls open their panel, resources,
 * chain, children, folded state and raw events, kept up to date from the live stream (live.ts)
 * while it runs.
 */
import type { TimelineRow } from "../../analytics/timeline.ts";
import type { Envelope } from "../../kernel/events.ts";
import type { ApplicableActions, ExecutionDetail, Lineage, Projection } from "../api-types.ts";
import { actionsSection, type ActionsView } from "./action-forms.ts";
import { api, apiPath, errorBox } from "./api.ts";
import { resourcesSection, timelineSection } from "./charts.ts";
import { announce, append, fill, h, mainEl } from "./dom.ts";
import { chainOf, childrenOf, eventRow, factsOf, ioOf, lineageOf } from "./execution-sections.ts";
import { isTerminal } from "./format.ts";
import { madeNote } from "./made.ts";
import { showStep } from "./step-panel.ts";
import { refusedTag, setBadge } from "./widgets.ts";

const MAX_EVENT_ROWS = 1000;

/** The detail as the contract has it; a server without lineage or actions yet still draws. */
type Detail = ExecutionDetail & Partial<{ lineage: Lineage; actions: ApplicableActions }>;
type Update = Projection & { events: Envelope[]; timeline: TimelineRow[]; nowMs: number };

/** What applies, by the server's word, less what the execution's end has closed since. */
export function applicable(d: Detail): ApplicableActions {
  const ended = isTerminal(d.summary.status);
  const a = d.actions ?? {
    cancel: true,
    resume: d.summary.status === "parked",
    send: true,
    fork: false,
    rerun: false,
  };
  return ended ? { ...a, cancel: false, resume: false, send: false } : a;
}

/** A server without `lineage` yet: what the folded state and the child tree say. */
function fallbackLineage(d: Detail): Lineage {
  const l: Lineage = { forks: [] };
  if (d.state._forkedFrom) l.forkedFrom = { ...d.state._forkedFrom };
  if (d.children.parent) l.parent = d.children.parent;
  return l;
}

function parts() {
  return {
    status: h(
      "span",
      { class: "badge", "data-testid": "status", role: "status", "aria-live": "polite" },
      "…",
    ),
    refused: h("span", { hidden: true }, refusedTag()),
    liveNote: h("span", { class: "muted live-note", "data-testid": "live" }),
    io: h("section", { class: "io panel", "aria-label": "Input and output", "data-testid": "io" }),
    facts: h("dl", { class: "facts" }),
    lineage: h("div", { class: "panel", "data-testid": "lineage-panel" }),
    timeline: h("div", { class: "timeline panel", "data-testid": "timeline" }),
    step: h("section", {
      class: "step-panel panel",
      hidden: true,
      tabindex: -1,
      "aria-label": "Call",
      "data-testid": "step-panel",
    }),
    resources: h("div", { class: "panel" }),
    chain: h("div", { class: "panel" }),
    children: h("div", { class: "panel" }),
    state: h("pre", { class: "json", "data-testid": "state", tabindex: 0 }),
    events: h("tbody"),
    eventsNote: h("p", { class: "muted" }),
  };
}

class ExecutionView {
  private readonly el = parts();
  private readonly actions: ActionsView;
  private d: Detail | null = null;
  private receivedAt = 0;
  private lastSeq = -1;
  private stream: EventSource | null = null;
  private disposed = false;
  private readonly ticker: number;

  constructor(private readonly id: string) {
    this.actions = actionsSection(
      id,
      () => this.d?.state.input,
      () => {
        if (!this.stream) this.load();
      },
    );
    this.layout();
    this.load();
    this.ticker = window.setInterval(() => {
      if (this.live() && this.d?.bars.bars.some((b) => b.endMs === null)) this.drawTimeline();
    }, 500);
  }

  private layout(): void {
    const el = this.el;
    const heading = (t: string): HTMLElement => h("h2", {}, t);
    append(mainEl(), [
      h("p", {}, h("a", { href: "#/" }, "← Executions")),
      h(
        "h1",
        {},
        h("span", { class: "mono" }, this.id),
        " ",
        el.status,
        " ",
        el.refused,
        " ",
        el.liveNote,
      ),
      madeNote(this.id),
      el.io,
      h("section", { "aria-label": "Facts", class: "panel" }, el.facts),
      [heading("Lineage"), el.lineage, heading("Actions"), this.actions.el],
      [heading("Timeline"), el.timeline, el.step, heading("Resources"), el.resources],
      [heading("Chain"), el.chain, heading("Children"), el.children],
      h("details", { class: "state" }, h("summary", {}, "Folded state"), el.state),
      [heading("Events"), el.eventsNote],
      h(
        "div",
        { class: "panel" },
        h(
          "table",
          { class: "events", "aria-label": "Events" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["Seq", "At", "Kind", "What", "Envelope"].map((t, i) =>
                h("th", { scope: "col", class: i < 2 ? "num" : "" }, t),
              ),
            ),
          ),
          el.events,
        ),
      ),
    ]);
  }

  private live(): boolean {
    return this.d !== null && !isTerminal(this.d.summary.status);
  }

  private drawTimeline(): void {
    const d = this.d;
    if (d === null) return;
    const nowOffset = d.nowMs + (performance.now() - this.receivedAt) - d.bars.t0Ms;
    fill(
      this.el.timeline,
      timelineSection(d.bars, nowOffset, this.live(), (callId) => this.openCall(callId)),
    );
  }

  private openCall(callId: string): void {
    const fork = this.d?.actions?.fork ? (seq: number) => this.actions.openFork(seq) : null;
    void showStep(this.el.step, this.id, callId, fork);
  }

  private drawAll(d: Detail): void {
    const el = this.el;
    setBadge(el.status, d.summary.status, d.state.error?.code);
    el.refused.hidden = el.status.dataset.status !== "refused";
    this.actions.update(applicable(d));
    fill(el.io, ioOf(d));
    fill(el.facts, factsOf(d));
    this.drawTimeline();
    fill(el.resources, resourcesSection(d.resources));
    el.state.textContent = JSON.stringify(d.state, null, 2);
  }

  private addEvents(d: Detail, events: readonly Envelope[], rows: readonly TimelineRow[]): void {
    const bySeq = new Map(rows.map((r) => [r.seq, r]));
    for (const e of events) this.el.events.append(eventRow(e, bySeq.get(e.seq)));
    while (this.el.events.children.length > MAX_EVENT_ROWS)
      this.el.events.firstElementChild?.remove();
    this.lastSeq = events.at(-1)?.seq ?? this.lastSeq;
    this.el.eventsNote.textContent =
      d.omittedEvents > 0
        ? `The newest events are shown; ${d.omittedEvents} older ones are not.`
        : "";
  }

  private closeStream(): void {
    this.stream?.close();
    this.stream = null;
    this.el.liveNote.textContent = "";
  }

  private openStream(d: Detail): void {
    if (this.stream || this.disposed || !this.live()) return;
    const s = new EventSource(`${apiPath(this.id)}/live?from=${this.lastSeq + 1}`);
    this.stream = s;
    this.el.liveNote.textContent = "live";
    s.addEventListener("update", (ev) => {
      const u = JSON.parse((ev as MessageEvent<string>).data) as Update;
      // Where it waited is as of the load: an event since (its admission, its call) moved it.
      delete d.waiting;
      Object.assign(d, {
        summary: u.summary,
        state: u.state,
        bars: u.bars,
        resources: u.resources,
        nowMs: u.nowMs,
      });
      this.receivedAt = performance.now();
      this.addEvents(d, u.events, u.timeline);
      this.drawAll(d);
      announce(`Status ${u.summary.status}, ${u.events.length} new event(s)`);
    });
    s.addEventListener("end", () => this.closeStream());
    // A stream the server refused for good (a 404 after retention, a 503) is CLOSED: say so, so
    // the page stops claiming to be live and reloads after an action.
    s.addEventListener("error", () => {
      if (!this.live() || s.readyState === EventSource.CLOSED) this.closeStream();
    });
  }

  load(): void {
    api<Detail>(apiPath(this.id))
      .then((d) => {
        if (this.disposed) return;
        this.closeStream();
        this.d = d;
        this.receivedAt = performance.now();
        this.lastSeq = -1;
        this.el.events.replaceChildren();
        this.addEvents(d, d.events, d.timeline);
        fill(this.el.lineage, lineageOf(d.lineage ?? fallbackLineage(d)));
        fill(this.el.chain, chainOf(d.chain, this.id));
        fill(this.el.children, childrenOf(d.children));
        this.drawAll(d);
        this.openStream(d);
      })
      .catch((err: unknown) => {
        if (this.disposed) return;
        const back = h("p", {}, h("a", { href: "#/" }, "← Executions"));
        mainEl().replaceChildren(
          back,
          h("h1", {}, h("span", { class: "mono" }, this.id)),
          errorBox(err),
        );
      });
  }

  dispose(): void {
    this.disposed = true;
    this.closeStream();
    window.clearInterval(this.ticker);
  }
}

export function showExecution(id: string): { dispose(): void } {
  document.title = `${id} · Loom`;
  return new ExecutionView(id);
}
