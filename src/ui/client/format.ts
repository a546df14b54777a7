/**
 * Numbers, times and statuses as people read them on the dashboard. Pure (no DOM), so the
 * tests run it in Node.
 *
 * Invariants (tests cite C1..C4):
 * C1. A cost prints as `loom show` prints it (analytics/numbers.ts N1): its currency, at most
 *     four significant digits.
 * C2. A duration prints in ms under a second, s under a minute, then min and s, then h and min.
 * C3. A time prints in the browser's time zone with the zone named, and its ISO form goes in a
 *     title; a time not known prints "-".
 * C4. Every status has its own class, and an execution refused by a quota (failed with
 *     LOOM_QUOTA_EXCEEDED) has one apart from failed and cancelled; the status is always
 *     printed as a word too, never told by colour alone.
 */
import type { UsageRow } from "../../analytics/resource-usage.ts";
import type { ExecutionStatus } from "../../kernel/events.ts";
import { STATUS_VIEWS, type StatusView } from "../../analytics/statuses.ts";
import { formatUsd } from "../../analytics/numbers.ts";

export { formatUsd };

/** C4: the kernel's statuses, each with its meaning and whether it ended (analytics S1, S2). */
const VIEWS: ReadonlyMap<string, StatusView> = new Map(STATUS_VIEWS.map((v) => [v.status, v]));

export type Status = ExecutionStatus;
export const STATUSES: readonly Status[] = STATUS_VIEWS.map((v) => v.status);

export const isTerminal = (status: string): boolean => VIEWS.get(status)?.ended === true;

/** What `status` means, in words (a badge's title); undefined for a status Loom has not. */
export const statusMeaning = (status: string): string | undefined => VIEWS.get(status)?.meaning;

/** C2 */
export function fmtDuration(ms: number | undefined): string {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return "-";
  const sign = ms < 0 ? "-" : "";
  const a = Math.abs(ms);
  if (a < 1000) return `${sign}${Math.round(a)} ms`;
  if (a < 60_000) return `${sign}${(a / 1000).toFixed(a < 10_000 ? 2 : 1)} s`;
  if (a < 3_600_000) {
    return `${sign}${Math.floor(a / 60_000)} min ${Math.round((a % 60_000) / 1000)} s`;
  }
  return `${sign}${Math.floor(a / 3_600_000)} h ${Math.round((a % 3_600_000) / 60_000)} min`;
}

export function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1_048_576) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1_073_741_824) return `${(n / 1_048_576).toFixed(1)} MiB`;
  return `${(n / 1_073_741_824).toFixed(2)} GiB`;
}

/** An amount of a budget dimension, in its unit (C1 for cost, C2 for time). */
export function fmtAmount(dimension: string, n: number): string {
  if (dimension === "costUsd") return formatUsd(n);
  if (dimension === "ms" || dimension === "wallMs" || dimension === "cpuMs") return fmtDuration(n);
  if (dimension === "memBytes" || dimension === "netBytes") return fmtBytes(n);
  return n.toLocaleString("en-US");
}

export interface ShownTime {
  /** Local time with its zone, e.g. "2026-12-04 09:36:27 CET". */
  text: string;
  /** The ISO form (UTC), for a title. */
  iso: string;
}

/** C3: `ms` in `timeZone` (the browser's when absent). */
export function fmtTime(ms: number | undefined, timeZone?: string): ShownTime {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms <= 0) return { text: "-", iso: "" };
  const parts = new Intl.DateTimeFormat("en-US", {
    ...(timeZone === undefined ? {} : { timeZone }),
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    hourCycle: "h23",
    timeZoneName: "short",
  }).formatToParts(ms);
  const p = (type: Intl.DateTimeFormatPartTypes): string =>
    parts.find((x) => x.type === type)?.value ?? "";
  const text = `${p("year")}-${p("month")}-${p("day")} ${p("hour")}:${p("minute")}:${p("second")} ${p("timeZoneName")}`;
  return { text, iso: new Date(ms).toISOString() };
}

/** How long before `nowMs` `ms` was: "3 s ago", "2 min 5 s ago", "in 4 s". */
export function fmtAgo(ms: number, nowMs: number): string {
  const d = nowMs - ms;
  if (d < 0) return `in ${fmtDuration(-d).replace(/\.\d+ s$/, " s")}`;
  if (d < 1000) return "just now";
  if (d < 60_000) return `${Math.floor(d / 1000)} s ago`;
  return `${fmtDuration(d)} ago`;
}

/** C4: the class of a status; `errorCode` is the execution's error's code, when it failed. */
export function statusClass(status: string, errorCode?: string): string {
  const known = VIEWS.has(status) ? status : "unknown";
  if (known === "failed" && errorCode === "LOOM_QUOTA_EXCEEDED") return "failed refused";
  return known;
}

/** The words of a resource meter (resource-usage.ts U1..U5). */
export function meterText(row: UsageRow): string {
  const limit = row.limit;
  return (
    (row.costUnknown ? "≥ " : "") +
    fmtAmount(row.dimension, row.spent) +
    (row.costUnknown ? " (some calls could not be priced)" : "") +
    (row.held ? ` + ${fmtAmount(row.dimension, row.held)} held by children` : "") +
    (typeof limit === "number" ? ` of ${fmtAmount(row.dimension, limit)}` : " (no limit)") +
    (row.exceeded ? " — exceeded" : "")
  );
}

/** A JSON value in a line, cut to `max` characters. */
export function jsonLine(value: unknown, max = 60): string {
  const text = JSON.stringify(value) ?? "undefined";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * The JSON in a text field, or a message saying what is wrong with it, with `what` named.
 * Empty text is `undefined` (nothing given).
 */
export function parseJsonText(
  text: string,
  what: string,
): { ok: true; value: unknown } | { ok: false; message: string } {
  const t = text.trim();
  if (t === "") return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(t) as unknown };
  } catch (e) {
    return {
      ok: false,
      message: `${what} is not JSON: ${e instanceof Error ? e.message : String(e)}`,
    };
  }
}
