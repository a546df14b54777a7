/**
 * Small pieces the pages share: a status badge (a word and a colour, format.ts C4), a time with
 * its ISO form on hover (C3), a cost (C1), an execution link, a JSON block and where an
 * execution waits (analytics/waits.ts W3).
 */
import { waitSentence } from "../../analytics/waits.ts";
import type { WaitReason } from "../api-types.ts";
import { execHref } from "./api.ts";
import { h, type Attrs } from "./dom.ts";
import { fmtTime, formatUsd, isTerminal, statusClass, statusMeaning } from "./format.ts";

/** A status badge: its word, and its class (`refused` apart from `failed`; `live` pulses). */
export function badge(status: string, errorCode?: string, attrs?: Attrs): HTMLElement {
  const el = h("span", attrs);
  setBadge(el, status, errorCode);
  return el;
}

export function setBadge(el: HTMLElement, status: string, errorCode?: string): void {
  const cls = statusClass(status, errorCode);
  el.textContent = status;
  el.setAttribute("class", `badge ${cls}${isTerminal(status) ? "" : " live"}`);
  el.dataset.status = cls.endsWith("refused") ? "refused" : status;
  if (cls.endsWith("refused")) el.title = "refused: a quota was exceeded";
  else {
    const meaning = statusMeaning(status);
    if (meaning === undefined) el.removeAttribute("title");
    else el.title = `${status}: ${meaning}`;
  }
}

/** The tag beside a failed badge that says a quota refused it (C4: not by colour alone). */
export function refusedTag(): HTMLElement {
  return h("span", { class: "badge refused", "data-testid": "refused" }, "refused");
}

export function timeEl(ms: number | undefined): HTMLElement {
  const t = fmtTime(ms);
  if (t.iso === "") return h("span", { class: "muted" }, "-");
  return h("time", { datetime: t.iso, title: t.iso }, t.text);
}

/** A cost, `≥` when some call could not be priced; "-" when nothing was spent. */
export function costEl(usd: number | undefined, unknown?: boolean): HTMLElement {
  if (usd === undefined) return h("span", { class: "muted" }, unknown ? "unpriced" : "-");
  return h("span", { title: String(usd) }, `${unknown ? "≥ " : ""}${formatUsd(usd)}`);
}

export function execLink(id: string, attrs?: Attrs): HTMLElement {
  return h("a", { href: execHref(id), class: "mono", ...attrs }, id);
}

export function jsonBlock(value: unknown, attrs?: Attrs): HTMLElement {
  const text = value === undefined ? "(none)" : JSON.stringify(value, null, 2);
  return h("pre", { class: "json", tabindex: 0, ...attrs }, text);
}

/** Where an execution waits (W3), or nothing when it does not. */
export function waitingEl(w: WaitReason | undefined, attrs?: Attrs): HTMLElement | null {
  if (w === undefined) return null;
  const title = w.kind === "queue" ? `${w.waitingCount} waiting in queue ${w.queue}` : undefined;
  return h("div", { class: "waiting", "data-testid": "waiting", title, ...attrs }, waitSentence(w));
}
