/**
 * The dashboard's client, bundled into `/assets/app.js` (scripts/build.mjs; bundle.ts when run
 * from the sources): it draws the view the hash names (router.ts U1) and disposes the one
 * before (its timers and live stream).
 */
import { h, mainEl } from "./dom.ts";
import { showExecution } from "./execution-page.ts";
import { showFleet } from "./fleet-page.ts";
import { showFlowControl } from "./flow-control-page.ts";
import { showList } from "./list-page.ts";
import { parseRoute, type Route } from "./router.ts";
import { showSchedules } from "./schedules-page.ts";

let current: { dispose(): void } | null = null;

function show(r: Route): { dispose(): void } {
  switch (r.page) {
    case "execution":
      return showExecution(r.id);
    case "schedules":
      return showSchedules();
    case "fleet":
      return showFleet();
    case "flow-control":
      return showFlowControl();
    case "list":
      return showList(r.filters);
  }
}

function markNav(r: Route): void {
  const page = r.page === "execution" ? "list" : r.page;
  for (const a of document.querySelectorAll<HTMLElement>("[data-nav]")) {
    if (a.dataset.nav === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function route(): void {
  const hash = location.hash || "#/";
  if (!hash.startsWith("#/")) return;
  current?.dispose();
  current = null;
  const r = parseRoute(hash);
  mainEl().replaceChildren();
  markNav(r);
  try {
    current = show(r);
  } catch (err) {
    mainEl().append(
      h(
        "div",
        { class: "error-box", role: "alert" },
        err instanceof Error ? err.message : String(err),
      ),
    );
  }
}

window.addEventListener("hashchange", route);
route();
