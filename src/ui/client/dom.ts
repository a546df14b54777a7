/**
 * DOM helpers of the dashboard's client: `h()` builds an element from a tag, attributes and
 * children, with text set through `textContent` and text nodes only, never `innerHTML`, so no
 * logged value (attacker-shaped) is ever read as markup.
 */
export type Kid = Node | string | number | null | undefined | false | readonly Kid[];
export type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

const SVG_NS = "http://www.w3.org/2000/svg" as const;

function setAttrs<E extends Element>(el: E, attrs: Attrs | undefined): E {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  return el;
}

/** Appends `kids` to `el` as nodes and text nodes. */
export function append<E extends Element>(el: E, kids: readonly Kid[]): E {
  for (const kid of kids) {
    if (kid === null || kid === undefined || kid === false) continue;
    if (typeof kid === "string" || typeof kid === "number") el.append(String(kid));
    else if (kid instanceof Node) el.append(kid);
    else append(el, kid);
  }
  return el;
}

/** `h("a", { href }, "text")`: an HTML element. An `on<event>` attribute adds a listener. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs,
  ...kids: Kid[]
): HTMLElementTagNameMap[K] {
  return append(setAttrs(document.createElement(tag), attrs), kids);
}

/** An SVG element, as `h` builds an HTML one. */
export function svg(tag: string, attrs?: Attrs, ...kids: Kid[]): SVGElement {
  return append(setAttrs(document.createElementNS(SVG_NS, tag), attrs), kids);
}

export function mainEl(): HTMLElement {
  const el = document.getElementById("main");
  if (el === null) throw new Error("the page has no <main id=main>");
  return el;
}

/** A read-only server (server.ts S5) says so in the page: no forms are drawn. */
export const isReadOnly = (): boolean =>
  document.querySelector("meta[name=loom-read-only]") !== null;

/** Says `text` to a screen reader (the page's polite live region). */
export function announce(text: string): void {
  const el = document.getElementById("announce");
  if (el) el.textContent = text;
}

/** Runs `open` on a click, and on Enter or Space when the element has the focus. */
export function onActivate(el: Element, open: () => void): void {
  el.addEventListener("click", open);
  el.addEventListener("keydown", (ev) => {
    const key = (ev as KeyboardEvent).key;
    if (key !== "Enter" && key !== " ") return;
    ev.preventDefault();
    open();
  });
}

/** Replaces the children of `el` with `kids`. */
export function fill<E extends Element>(el: E, kids: readonly Kid[]): E {
  el.replaceChildren();
  return append(el, kids);
}
