/**
 * Client script, part 1: DOM helpers, the API client, formatting and the hash router. Plain
 * browser JavaScript kept as text (served as one module by app.ts); it builds every element
 * with textContent, never innerHTML, so no logged value is ever read as markup.
 * (No backtick or dollar-brace in here: this is a template literal.)
 */
export const CLIENT_CORE = String.raw`
"use strict";
const STATUSES = ["pending", "running", "parked", "completed", "failed", "cancelled", "continued"];
const TERMINAL = new Set(["completed", "failed", "cancelled", "continued"]);
const SVG_NS = "http://www.w3.org/2000/svg";
const mainEl = document.getElementById("main");
/** A read-only server (server.ts S5) says so in the page: no forms are drawn. */
const isReadOnly = () => document.querySelector("meta[name=loom-read-only]") !== null;

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.setAttribute("class", v);
    else if (k === "text") el.textContent = String(v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  return el;
}
function append(el, kids) {
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}
function h(tag, attrs, ...kids) {
  return append(setAttrs(document.createElement(tag), attrs), kids);
}
function svg(tag, attrs, ...kids) {
  return append(setAttrs(document.createElementNS(SVG_NS, tag), attrs), kids);
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}
async function api(path, options) {
  const res = await fetch(path, Object.assign({ headers: { Accept: "application/json" } }, options));
  let body = null;
  try {
    body = await res.json();
  } catch (e) {
    body = null;
  }
  if (!res.ok) {
    const err = body && body.error ? body.error : { code: "HTTP_" + res.status, message: res.statusText };
    throw new ApiError(res.status, err.code, err.message);
  }
  return body;
}
function post(path, body) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body),
  });
}
const apiPath = (id) => "/api/executions/" + encodeURIComponent(id);
const execHref = (id) => "#/x/" + encodeURIComponent(id);

function badge(status, attrs) {
  const el = h("span", Object.assign({ class: "badge " + status }, attrs || {}), status);
  return el;
}
function setBadge(el, status) {
  el.textContent = status;
  el.setAttribute("class", "badge " + status + (TERMINAL.has(status) ? "" : " live"));
}
function pad(n, w) {
  return String(n).padStart(w || 2, "0");
}
function fmtTime(ms) {
  if (typeof ms !== "number" || !isFinite(ms) || ms <= 0) return "-";
  const d = new Date(ms);
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
}
function fmtDuration(ms) {
  if (typeof ms !== "number" || !isFinite(ms)) return "-";
  const sign = ms < 0 ? "-" : "";
  ms = Math.abs(ms);
  if (ms < 1000) return sign + Math.round(ms) + " ms";
  if (ms < 60000) return sign + (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  if (ms < 3600000) return sign + Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
  return sign + Math.floor(ms / 3600000) + " h " + Math.round((ms % 3600000) / 60000) + " min";
}
function fmtBytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
  if (n < 1073741824) return (n / 1048576).toFixed(1) + " MiB";
  return (n / 1073741824).toFixed(2) + " GiB";
}
function fmtAmount(dimension, n) {
  if (dimension === "costUsd") return "$" + (n < 0.01 && n > 0 ? n.toPrecision(3) : n.toFixed(4));
  if (dimension === "ms" || dimension === "wallMs") return fmtDuration(n);
  if (dimension === "memBytes" || dimension === "netBytes") return fmtBytes(n);
  return n.toLocaleString("en-US");
}
function announce(text) {
  const el = document.getElementById("announce");
  if (el) el.textContent = text;
}
function errorBox(err) {
  const what = err instanceof ApiError ? err.code + ": " + err.message : String(err && err.message || err);
  return h("div", { class: "error-box", role: "alert" }, what);
}

/** The view on screen; a new route disposes it (stops its live stream and timers). */
let currentView = null;
function route() {
  const hash = location.hash || "#/";
  if (!hash.startsWith("#/")) return;
  if (currentView && currentView.dispose) currentView.dispose();
  currentView = null;
  const path = hash.slice(1);
  const at = path.indexOf("?");
  const pathname = at < 0 ? path : path.slice(0, at);
  const params = new URLSearchParams(at < 0 ? "" : path.slice(at + 1));
  mainEl.replaceChildren();
  if (pathname.startsWith("/x/")) {
    let id;
    try {
      id = decodeURIComponent(pathname.slice(3));
    } catch (e) {
      id = pathname.slice(3);
    }
    currentView = showExecution(id);
  } else {
    currentView = showList(params);
  }
}
`;
