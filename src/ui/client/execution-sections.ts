/**
 * The parts of an execution's page drawn from its detail (api-types.ts): the facts, the input
 * and the output or error, the lineage (fork of, forked as, continued from and to, parent),
 * the chain, the children and the event rows.
 */
import type { ChildNode, ChildTree } from "../../analytics/child-tree.ts";
import type { TimelineRow } from "../../analytics/timeline.ts";
import type { Envelope } from "../../kernel/events.ts";
import type { ExecutionDetail, Lineage } from "../api-types.ts";
import type { ChainView } from "../api-types.ts";
import { execHref } from "./api.ts";
import { h, type Kid } from "./dom.ts";
import { fmtDuration, jsonLine } from "./format.ts";
import { badge, execLink, jsonBlock, timeEl, waitingEl } from "./widgets.ts";

export function factsOf(d: Pick<ExecutionDetail, "summary" | "state" | "waiting">): Kid[] {
  const s = d.summary;
  const st = d.state;
  const fact = (k: string, ...v: Kid[]): Kid[] => [h("dt", {}, k), h("dd", {}, ...v)];
  return [
    fact("Flow", s.flow + (st.flowVersion ? ` v${st.flowVersion}` : "")),
    fact("Started", timeEl(s.startedAtMs)),
    fact(
      "Updated",
      timeEl(s.updatedAtMs),
      ` (${fmtDuration(s.updatedAtMs - s.startedAtMs)} after the start)`,
    ),
    fact("Last sequence", String(s.head)),
    d.waiting
      ? fact(
          "Waiting",
          waitingEl(d.waiting),
          h("a", { href: "#/flow-control" }, "see flow control"),
        )
      : [],
    st.deadlineMs ? fact("Deadline", timeEl(s.startedAtMs + st.deadlineMs)) : [],
    st._quotaExceeded
      ? fact(
          "Quota exceeded",
          `${st._quotaExceeded.dimension} of the ${st._quotaExceeded.budget} budget`,
        )
      : [],
  ];
}

/** The input, then the output, or the error of a failed execution. */
export function ioOf(d: Pick<ExecutionDetail, "state">): Kid[] {
  const st = d.state;
  return [
    h(
      "div",
      { class: "io-part" },
      h("h3", {}, "Input"),
      jsonBlock(st.input, { "data-testid": "input" }),
    ),
    st.error
      ? h(
          "div",
          { class: "io-part" },
          h("h3", {}, "Error"),
          h(
            "div",
            { class: "error-box", "data-testid": "exec-error" },
            `${st.error.code}: ${st.error.message}`,
          ),
        )
      : h(
          "div",
          { class: "io-part" },
          h("h3", {}, "Output"),
          st.status === "completed"
            ? jsonBlock(st.output, { "data-testid": "output" })
            : h("p", { class: "muted", "data-testid": "output" }, "Not yet: it has not completed."),
        ),
  ];
}

export function lineageOf(l: Lineage | undefined): Kid[] {
  if (l === undefined) return [h("p", { class: "muted" }, "This server does not say the lineage.")];
  const link = (what: string, id: string, testid: string, more = ""): HTMLElement =>
    h("li", { "data-testid": testid }, `${what} `, execLink(id), more);
  const items: Kid[] = [
    l.forkedFrom
      ? link("Fork of", l.forkedFrom.executionId, "forked-from", ` at sequence ${l.forkedFrom.seq}`)
      : null,
    ...l.forks.map((f) => link("Forked as", f.executionId, "forked-as", ` at sequence ${f.seq}`)),
    l.continuedFrom ? link("Continued from", l.continuedFrom, "continued-from") : null,
    l.continuedTo ? link("Continued to", l.continuedTo, "continued-to") : null,
    l.parent ? link("Parent", l.parent, "parent") : null,
  ].filter((x) => x !== null);
  if (items.length === 0) return [h("p", { class: "muted" }, "No fork, chain or parent.")];
  return [h("ul", { class: "lineage", "data-testid": "lineage" }, items)];
}

export function chainOf(chain: ChainView | null, shownId: string): Kid[] {
  if (!chain) return [h("p", { class: "muted" }, "A single generation (it never continued).")];
  const first = chain.generations[0]?.generation ?? 0;
  return [
    h(
      "p",
      {},
      "Chain ",
      h("span", { class: "mono" }, chain.chainId),
      `: ${chain.generations.length} generation(s)`,
      chain.routedHead ? [", routed head ", execLink(chain.routedHead)] : "",
      chain.partial ? " (only the nearest generations are read)" : "",
    ),
    h(
      "ol",
      { start: first, "aria-label": "Generations" },
      chain.generations.map((g) =>
        h(
          "li",
          { class: g.executionId === chain.head ? "gen-head" : "" },
          g.executionId === shownId
            ? h("span", { class: "mono" }, `${g.executionId} (this one)`)
            : execLink(g.executionId),
          " ",
          badge(g.status),
          g.executionId === chain.head ? " ← head" : "",
        ),
      ),
    ),
  ];
}

function childNodes(nodes: readonly ChildNode[]): HTMLElement {
  return h(
    "ul",
    {},
    nodes.map((n) =>
      h(
        "li",
        {},
        h("a", { href: execHref(n.head ?? n.executionId), class: "mono" }, n.executionId),
        " ",
        h("span", { class: "muted" }, n.flow + (n.detached ? ", detached" : "")),
        " ",
        n.status ? badge(n.status) : h("span", { class: "muted" }, "(not readable)"),
        n.head ? h("span", { class: "muted" }, ` head ${n.head}`) : "",
        n.children.length > 0 ? childNodes(n.children) : "",
      ),
    ),
  );
}

export function childrenOf(tree: ChildTree): Kid[] {
  if (tree.children.length === 0) return [h("p", { class: "muted" }, "No children.")];
  return [h("div", { class: "tree" }, childNodes(tree.children))];
}

export function eventRow(e: Envelope, row: TimelineRow | undefined): HTMLElement {
  return h(
    "tr",
    { "data-testid": "event-row", "data-kind": e.kind },
    h("td", { class: "num" }, String(e.seq)),
    h("td", { class: "num" }, `+${fmtDuration(row ? row.offsetMs : 0)}`),
    h("td", { class: "mono" }, e.kind),
    h("td", {}, row ? row.text : ""),
    h(
      "td",
      { class: "payload" },
      h(
        "details",
        {},
        h("summary", {}, jsonLine(e.payload)),
        h("pre", {}, JSON.stringify(e, null, 2)),
      ),
    ),
  );
}
