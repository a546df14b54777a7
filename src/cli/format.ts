/**
 * What the commands print. Machine-readable output (`run`, `--json`) is JSON on stdout; the rest
 * is for people: aligned columns, times in ISO 8601 UTC, long values cut short.
 */
import type { Envelope } from "../kernel/events.ts";
import type { ErrorData } from "../kernel/errors.ts";
import type { ChainLineage } from "../analytics/chain-lineage.ts";
import type { ChildNode, ChildTree } from "../analytics/child-tree.ts";
import { callsOf } from "../fold/settled.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { Outcome } from "../runtime/outcome.ts";
import type { Erasure } from "../runtime/erase-subject.ts";
import type { VerifyReport } from "../trust/verify.ts";
import type { ExecutionSummary } from "../store/spi.ts";
import { timeline } from "../analytics/timeline.ts";
import { formatUsd } from "../analytics/numbers.ts";
import type { WaitShown } from "../analytics/waits.ts";
import { pushWaitColumns } from "./format-waits.ts";

/** `loom run`'s result: the outcome, with the execution's id first. */
export function formatOutcome(id: string, outcome: Outcome): string {
  return JSON.stringify({ id, ...outcome }, null, 2);
}

/**
 * The list as a table. OWNER names the process holding a live lease (driving it now); "-" for a
 * released or expired one, so a `running` execution with no owner is waiting for recovery.
 * `waits` (runtime.waits()) adds what waits where (format-waits.ts): QUEUE, KEY, POS and EXPECTED
 * for `queuedView` (`--status queued`), else a WAITING column when some row waits.
 */
export function formatList(
  rows: readonly ExecutionSummary[],
  owners: ReadonlyMap<string, string> = new Map(),
  waits: ReadonlyMap<string, WaitShown> = new Map(),
  queuedView = false,
): string {
  if (rows.length === 0) return "no executions";
  const table = [
    ["ID", "FLOW", "STATUS", "EVENTS", "UPDATED", "OWNER"],
    ...rows.map((r) => [
      r.executionId,
      r.flow,
      r.status,
      String(r.head + 1),
      iso(r.updatedAtMs),
      owners.get(r.executionId) ?? "-",
    ]),
  ];
  // COST and TOKENS only when some execution has spent (issue 25 item 4).
  if (rows.some((r) => r.costUsd !== undefined || r.costUnknown || r.tokens !== undefined)) {
    table.forEach((line, i) => {
      const r = rows[i - 1];
      line.push(i === 0 ? "COST" : rowCost(r), i === 0 ? "TOKENS" : String(r?.tokens ?? "-"));
    });
  }
  pushWaitColumns(table, rows, waits, queuedView);
  // An ERROR column only when a log cannot be read (issue 21 item 3): the usual table is unchanged.
  if (rows.some((r) => r.error)) {
    table.forEach((line, i) => line.push(i === 0 ? "ERROR" : errorCell(rows[i - 1])));
  }
  return columns(table);
}

/** A row's cost for `loom ls`: "≥ $x" when some call could not be priced (a lower bound). */
function rowCost(r: ExecutionSummary | undefined): string {
  if (r?.costUsd === undefined) return r?.costUnknown ? "unknown" : "-";
  return `${r.costUnknown ? "≥ " : ""}${formatUsd(r.costUsd)}`;
}

function errorCell(r: ExecutionSummary | undefined): string {
  if (!r?.error) return "-";
  const details = r.error.details as { seq?: unknown } | undefined;
  const at = typeof details?.seq === "number" ? ` at seq ${details.seq}` : "";
  return `${r.error.name}${at}`;
}

/** ", N compacted away" when the log has gaps (compaction keeps sequence numbers). */
function compactedNote(events: readonly Envelope[]): string {
  const appended = (events.at(-1)?.seq ?? -1) + 1;
  return appended > events.length ? `, ${appended - events.length} compacted away` : "";
}

export function formatShow(
  state: ExecutionState,
  events: readonly Envelope[],
  lineage?: ChainLineage,
  tree?: ChildTree,
): string {
  const erased = state._erased ?? [];
  const summary: [string, string][] = [
    ["id", state.executionId],
    [
      "flow",
      state.flow === "" && erased.length > 0
        ? "(erased)"
        : `${state.flow} (version ${state.flowVersion}, code ${state.fingerprint})`,
    ],
    ["status", state.status],
    ["started", iso(state.startedAt)],
    ["updated", iso(state.updatedAt)],
    ["input", brief(state.input)],
  ];
  if (state.output !== undefined) summary.push(["output", brief(state.output)]);
  if (state.error) summary.push(["error", errorText(state.error)]);
  const cost = costText(state);
  if (cost !== undefined) summary.push(["cost", cost]);
  const steps = callsOf(state);
  if (steps.length > 0) {
    const call = ([id, f]: (typeof steps)[number]) =>
      `${id} ${f.status}${f.attempts > 1 ? ` (${f.attempts} attempts)` : ""}`;
    summary.push(["calls", steps.map(call).join(", ")]);
  }
  if (state._openSuspends.length > 0) {
    summary.push(["waiting", `${state._openSuspends.join(", ")} (answer with loom resume)`]);
  }
  if (state._continuedTo !== undefined) summary.push(["continued", `as ${state._continuedTo}`]);
  if (lineage && lineage.generations.length > 1) {
    const names = lineage.generations.map((g) =>
      g.executionId === state.executionId ? `[${g.executionId}]` : g.executionId,
    );
    summary.push([
      "chain",
      `${lineage.chainId}: ${lineage.generations.length} generations, ${names.join(" -> ")} (head ${lineage.head}, ${lineage.generations.at(-1)?.status ?? "?"})`,
    ]);
  }
  if (tree?.parent !== undefined) summary.push(["parent", tree.parent]);
  const fork = state._forkedFrom;
  if (fork !== undefined)
    summary.push(["forked", `from ${fork.executionId} at sequence ${fork.seq}`]);
  if (erased.length > 0) {
    summary.push(["erased", `subject ${erased.join(", ")} (payloads unrecoverable)`]);
  }
  const erasedAt = new Map(events.flatMap((e) => erasedPayloadOf(e)));
  const rows = timeline(events).map((r) => [
    String(r.seq),
    `+${r.offsetMs}ms`,
    r.kind,
    erasedAt.get(r.seq) ?? r.text,
  ]);
  const children = tree && tree.children.length > 0 ? ["", ...childLines(tree.children)] : [];
  return [
    columns(summary),
    ...children,
    "",
    `timeline (${events.length} events${compactedNote(events)})`,
    columns([["SEQ", "AT", "KIND", "WHAT"], ...rows], "  "),
  ].join("\n");
}

/**
 * What the execution's calls cost in USD, when any was priced or could not be: a lower bound
 * when some could not be priced (`costUnknown`, issue 20).
 */
function costText(state: ExecutionState): string | undefined {
  const usd = state._resources?.costUsd;
  if (state._resources?.costUnknown !== true) return usd === undefined ? undefined : formatUsd(usd);
  if (usd === undefined) return "unknown (its calls could not be priced)";
  return `≥ ${formatUsd(usd)} (some calls could not be priced)`;
}

/** `[seq, text]` for an event whose payload an erasure made unrecoverable (`{ $erased }`). */
function erasedPayloadOf(e: Envelope): [number, string][] {
  const p = e.payload as { $erased?: unknown } | null;
  return p !== null && typeof p === "object" && typeof p.$erased === "string"
    ? [[e.seq, `(payload erased: subject ${p.$erased})`]]
    : [];
}

/** The children tree, one child a line, indented by depth (issue 8). */
function childLines(nodes: readonly ChildNode[], depth = 0): string[] {
  const lines = depth === 0 ? [`children (${nodes.length})`] : [];
  for (const n of nodes) {
    const head = n.head === undefined ? "" : ` (continued; head ${n.head})`;
    const detached = n.detached ? ", detached" : "";
    const line = `${"  ".repeat(depth + 1)}${n.executionId}  ${n.flow}${detached}  ${n.status ?? "no log"}${head}`;
    lines.push(line, ...childLines(n.children, depth + 1));
  }
  return lines;
}

/** `loom verify`: one line, `ok ...` or `TAMPERED ...`. */
export function formatVerify(report: VerifyReport): string {
  const { executionId: id, predecessor: p } = report;
  const link = p ? `, predecessor ${p.executionId} (${p.link})` : "";
  if (!report.ok) {
    return `TAMPERED ${id}: first bad sequence ${report.firstBadSeq ?? "?"} (${report.problem ?? "?"})${link}`;
  }
  const compacted =
    report.compactedThrough === undefined ? "" : `, compacted through ${report.compactedThrough}`;
  return `ok ${id}: ${report.events} events, head ${report.headHash ?? "-"}${compacted}${link}`;
}

/** `loom erase-subject`: what was erased, cancelled and destroyed. */
export function formatErasure(erasure: Erasure): string {
  const list = (ids: readonly string[]): string =>
    ids.length === 0 ? "none" : `${ids.length}: ${ids.join(", ")}`;
  return columns([
    ["erased", `subject ${erasure.subject}`],
    ["executions", list(erasure.executions)],
    ["cancelled", list(erasure.cancelled)],
    [
      "key",
      erasure.keyUnconfirmed !== undefined
        ? `deleted, but NOT confirmed gone from the store's files: ${erasure.keyUnconfirmed}`
        : erasure.keyDestroyed
          ? "destroyed"
          : "none left to destroy (destroyed by an earlier erasure, or never stored)",
    ],
  ]);
}

export function errorText(error: ErrorData): string {
  return `${error.code} ${error.name}: ${error.message}`;
}

/** Quotes a word for a POSIX shell only when it needs it, so a printed command can be pasted. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9._:/@+=,%-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

export function columns(rows: readonly (readonly string[])[], indent = ""): string {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  }
  const line = (row: readonly string[]): string =>
    row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  ");
  return rows.map((row) => `${indent}${line(row)}`.trimEnd()).join("\n");
}

export function iso(ms: number): string {
  return Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms);
}

export function brief(value: unknown, max = 200): string {
  if (value === undefined) return "nothing";
  const text = JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
