/**
 * The dashboard's one HTML page: a shell the client script (client/, bundled by bundle.ts) fills
 * by the URL's hash (`#/` the executions list, `#/x/<id>` an execution, `#/schedules`,
 * `#/fleet`, `#/flow-control`). No inline script or style, so the
 * Content-Security-Policy (http.ts H3) can forbid both; no external font or CDN. A read-only
 * server's page carries `<meta name="loom-read-only">`, and the script then draws no forms
 * (server.ts S5).
 */
const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Loom</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/app.css">
<script type="module" src="/assets/app.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <a class="brand" href="#/">Loom</a>
  <nav class="nav" aria-label="Pages">
    <a href="#/" data-nav="list">Executions</a>
    <a href="#/schedules" data-nav="schedules">Schedules</a>
    <a href="#/fleet" data-nav="fleet">Fleet</a>
    <a href="#/flow-control" data-nav="flow-control">Flow control</a>
  </nav>
</header>
<main id="main" tabindex="-1">
  <p class="muted" id="boot">Loading…</p>
  <noscript>This dashboard needs JavaScript.</noscript>
</main>
<div id="announce" class="visually-hidden" aria-live="polite"></div>
</body>
</html>
`;

export function pageHtml(readOnly: boolean): string {
  return readOnly ? PAGE_HTML.replace("<title>", `${READ_ONLY_META}\n<title>`) : PAGE_HTML;
}

const READ_ONLY_META = `<meta name="loom-read-only" content="true">`;
