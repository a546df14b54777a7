/**
 * The dashboard's styles: system fonts only, light and dark schemes, statuses told by text as
 * well as colour, visible focus.
 */
export const APP_CSS = String.raw`
:root {
  --bg: #fbfbfc; --fg: #1d2330; --muted: #5b6474; --line: #d9dde4; --panel: #ffffff;
  --link: #1d4ed8; --focus: #f59e0b;
  --pending: #6b7280; --running: #1d4ed8; --parked: #7c3aed; --completed: #15803d;
  --failed: #b91c1c; --cancelled: #b45309; --continued: #0f766e; --refused: #be185d;
  --queued: #0369a1;
  --bar-step: #3b82f6; --bar-sleep: #a3a3a3; --bar-suspend: #a855f7; --bar-receive: #14b8a6;
  --bar-child: #f97316; --marker: #dc2626;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  font-size: 15px; line-height: 1.45; color: var(--fg); background: var(--bg);
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #12151b; --fg: #e6e8ec; --muted: #9aa3b2; --line: #2c323d; --panel: #1a1e26;
    --link: #8ab4ff; --running: #60a5fa; --parked: #c4b5fd; --completed: #4ade80;
    --failed: #f87171; --cancelled: #fbbf24; --continued: #5eead4; --pending: #9ca3af;
    --refused: #f472b6; --queued: #38bdf8;
  }
}
* { box-sizing: border-box; }
body { margin: 0; }
a { color: var(--link); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 13px; }
.skip { position: absolute; left: -999px; top: 0; background: var(--panel); padding: 6px 10px; }
.skip:focus { left: 8px; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.top { display: flex; gap: 12px; align-items: baseline; padding: 12px 24px; border-bottom: 1px solid var(--line); background: var(--panel); }
.brand { font-weight: 700; font-size: 18px; text-decoration: none; color: var(--fg); }
.tagline, .muted { color: var(--muted); }
main { padding: 16px 24px 48px; max-width: 1280px; margin: 0 auto; }
h1 { font-size: 20px; margin: 8px 0 12px; word-break: break-all; }
h1 .mono { font-size: inherit; }
h1 .live-note { font-size: 13px; font-weight: 400; }
h2 { font-size: 16px; margin: 28px 0 8px; }
section { margin-top: 8px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.filters { display: flex; flex-wrap: wrap; gap: 12px 20px; align-items: flex-end; }
.filters fieldset { border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; margin: 0; }
.filters legend { font-size: 13px; color: var(--muted); }
.filters label { margin-right: 10px; white-space: nowrap; }
.field { display: flex; flex-direction: column; gap: 2px; font-size: 13px; color: var(--muted); }
input[type=text], input[type=search], textarea { font: inherit; color: var(--fg); background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 5px 8px; }
textarea { width: 100%; min-height: 72px; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; }
button { font: inherit; cursor: pointer; border: 1px solid var(--line); border-radius: 6px; padding: 5px 12px; background: var(--panel); color: var(--fg); }
button:disabled { opacity: .5; cursor: not-allowed; }
button.danger { border-color: var(--failed); color: var(--failed); }
button.primary { border-color: var(--link); color: var(--link); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 13px; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.id-cell { word-break: break-all; }
.pager { display: flex; gap: 10px; align-items: center; margin-top: 10px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600; border: 1px solid currentColor; }
.badge.pending { color: var(--pending); } .badge.running { color: var(--running); }
.badge.parked { color: var(--parked); } .badge.completed { color: var(--completed); }
.badge.failed { color: var(--failed); } .badge.cancelled { color: var(--cancelled); }
.badge.continued { color: var(--continued); }
.badge.queued { color: var(--queued); border-style: dotted; }
.waiting { color: var(--queued); font-size: 13px; }
.badge.refused { color: var(--refused); border-style: dashed; }
.badge.sealed, .badge.paused { color: var(--muted); margin-left: 6px; }
.badge.live::before { content: ""; display: inline-block; width: 7px; height: 7px; margin-right: 5px; border-radius: 50%; background: currentColor; animation: pulse 1.2s infinite; }
@keyframes pulse { 50% { opacity: .25; } }
@media (prefers-reduced-motion: reduce) { .badge.live::before { animation: none; } }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; word-break: break-all; }
.actions { display: grid; grid-template-columns: repeat(auto-fit, minmax(260px, 1fr)); gap: 12px; }
.confirm { margin-top: 8px; padding: 8px; border: 1px dashed var(--failed); border-radius: 6px; display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
.message { margin-top: 6px; font-size: 13px; }
.message.error { color: var(--failed); }
.timeline svg { width: 100%; height: auto; display: block; }
.timeline .label { font-size: 11px; fill: var(--fg); }
.timeline .axis { font-size: 10px; fill: var(--muted); }
.timeline .grid { stroke: var(--line); }
.bar.step { fill: var(--bar-step); } .bar.sleep { fill: var(--bar-sleep); }
.bar.suspend { fill: var(--bar-suspend); } .bar.receive { fill: var(--bar-receive); }
.bar.child { fill: var(--bar-child); }
.bar.failed, .bar.cancelled, .bar.timedOut { fill: var(--failed); }
.bar.running { opacity: .65; }
.bar.ended { opacity: .45; }
.wakeline { stroke: var(--muted); stroke-dasharray: 3 3; }
.marker line { stroke: var(--marker); stroke-width: 2; }
.marker path { fill: var(--marker); }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; font-size: 12px; color: var(--muted); margin-top: 6px; }
.swatch { display: inline-block; width: 12px; height: 10px; border-radius: 2px; margin-right: 4px; vertical-align: middle; }
.swatch.step { background: var(--bar-step); } .swatch.sleep { background: var(--bar-sleep); }
.swatch.suspend { background: var(--bar-suspend); } .swatch.receive { background: var(--bar-receive); }
.swatch.child { background: var(--bar-child); } .swatch.marker { background: var(--marker); }
.meter { display: grid; grid-template-columns: 190px 1fr 240px; gap: 8px; align-items: center; margin: 4px 0; }
.meter-track { height: 12px; background: var(--line); border-radius: 6px; overflow: hidden; position: relative; }
.meter-fill { height: 100%; background: var(--completed); }
.meter-fill.warn { background: var(--cancelled); }
.meter-fill.over { background: var(--failed); }
pre.json { max-height: 420px; overflow: auto; background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 10px; margin: 0; }
.events td.payload { max-width: 480px; }
.events details summary { cursor: pointer; color: var(--muted); }
.events pre { white-space: pre-wrap; word-break: break-all; margin: 4px 0 0; }
.tree, .tree ul { list-style: none; padding-left: 18px; margin: 4px 0; }
.tree li { margin: 3px 0; }
.gen-head { font-weight: 700; }
.error-box { border: 1px solid var(--failed); color: var(--failed); border-radius: 6px; padding: 10px; }
.nav { display: flex; gap: 14px; margin-left: 16px; }
.nav a[aria-current=page] { font-weight: 700; text-decoration: none; color: var(--fg); }
th button.sort { border: 0; padding: 0; background: none; color: inherit; font: inherit; font-weight: 600; }
input[type=number], input[type=datetime-local] { font: inherit; color: var(--fg); background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 5px 8px; }
.io { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 12px; margin-bottom: 12px; }
.io h3, .step-panel h4 { margin: 0 0 4px; font-size: 14px; }
.step-panel h4 { margin-top: 12px; }
.lineage { margin: 0; padding-left: 18px; }
.action-bar { display: flex; flex-wrap: wrap; gap: 8px; }
.action-form { margin-top: 8px; max-width: 640px; }
.form .field { margin-top: 6px; }
details.state summary { cursor: pointer; font-size: 16px; font-weight: 700; margin: 28px 0 8px; }
.timeline g.row { cursor: pointer; }
.timeline g.row:focus-visible { outline: 3px solid var(--focus); }
.step-panel { margin-top: 10px; position: relative; }
.step-panel .close { position: absolute; top: 8px; right: 8px; }
.error-text { color: var(--failed); }
.conversation .messages { list-style: none; padding: 0; margin: 8px 0; }
.msg { border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; margin: 6px 0; }
.msg-role { font-size: 12px; font-weight: 700; color: var(--muted); text-transform: uppercase; }
.msg-text { white-space: pre-wrap; word-break: break-word; }
.msg.user { border-left: 4px solid var(--running); }
.msg.assistant { border-left: 4px solid var(--completed); }
.msg.tool { border-left: 4px solid var(--parked); }
.msg.system { border-left: 4px solid var(--muted); }
.usage { color: var(--muted); font-size: 13px; }
ul.plain { list-style: none; padding: 0; margin: 0; }
.made { margin-bottom: 12px; border-color: var(--link); }
`;
