/**
 * What `loom show --step` and `loom show --llm` print for people: one call in full, and an LLM
 * call as its conversation (analytics/step-detail.ts, analytics/conversation.ts). Costs to four
 * significant digits with their currency (analytics/numbers.ts N1); `--json` prints the exact
 * figures.
 */
import type { StepDetail } from "../analytics/step-detail.ts";
import type { Conversation } from "../analytics/conversation.ts";
import { formatUsd } from "../analytics/numbers.ts";
import type { ResourceSnapshot } from "../kernel/resources.ts";
import type { LlmMessage, LlmToolCall } from "../providers/llm-core.ts";
import { brief, columns, errorText, iso, shellQuote } from "./format.ts";

/** One call in full: its facts, its attempts, and its conversation when it is an LLM call. */
export function formatStep(executionId: string, d: StepDetail): string {
  const where = d.scope === "" ? "" : ` in scope ${d.scope}`;
  const rows: [string, string][] = [
    ["call", `${d.callId} (${d.kind} ${d.name}${where})`],
    ["status", d.status],
  ];
  if (d.startedAtMs !== undefined) rows.push(["started", iso(d.startedAtMs)]);
  if (d.endedAtMs !== undefined) rows.push(["ended", `${iso(d.endedAtMs)} (${ms(d.durationMs)})`]);
  if (d.input !== undefined) rows.push(["input", brief(d.input, 400)]);
  if (d.output !== undefined) rows.push(["output", brief(d.output, 400)]);
  if (d.error !== undefined) rows.push(["error", errorText(d.error)]);
  const spent = meteringText(d.metering);
  if (spent !== "") rows.push(["metering", spent]);
  for (const t of d.taint) rows.push(["taint", `${t.where} ${t.path} from ${t.source}`]);
  if (d.seqs.length > 0) rows.push(["events", d.seqs.join(", ")]);
  if (d.forkAt !== undefined) {
    const cmd = `loom fork ${shellQuote(executionId)} ${d.forkAt}`;
    rows.push(["fork at", `${d.forkAt} (\`${cmd}\` runs this call again)`]);
  }
  const lines = [columns(rows)];
  if (d.attempts.length > 0) {
    lines.push("", `attempts (${d.attempts.length})`);
    const table = d.attempts.map((a) => [
      String(a.attempt),
      a.startedAtMs === undefined ? "-" : iso(a.startedAtMs),
      a.endedAtMs === undefined ? "running" : ms(a.durationMs),
      a.error === undefined ? (a.endedAtMs === undefined ? "" : "ok") : errorText(a.error),
    ]);
    lines.push(columns([["#", "STARTED", "TOOK", "ENDED"], ...table], "  "));
  }
  if (d.llm !== undefined) lines.push("", formatConversation(d.callId, d.llm));
  return lines.join("\n");
}

/** An LLM call as a conversation: what was sent, what came back, its tokens and price. */
export function formatConversation(callId: string, c: Conversation): string {
  const lines = [`LLM call ${callId}${c.model === undefined ? "" : ` (${c.model})`}`];
  if (c.system !== undefined) lines.push(`  system: ${c.system}`);
  if (c.tools !== undefined && c.tools.length > 0) {
    lines.push(`  tools: ${c.tools.map((t) => t.name).join(", ")}`);
  }
  for (const m of c.messages) lines.push(...messageLines(m));
  if (c.answer !== undefined) {
    lines.push(`  answer: ${c.answer.text === "" ? "(no text)" : c.answer.text}`);
    for (const t of c.answer.toolCalls) lines.push(`    ${toolCallText(t)}`);
    if (c.answer.stopReason !== null) lines.push(`    stop: ${c.answer.stopReason}`);
  }
  if (c.usage !== undefined) {
    const u = c.usage;
    const cache =
      u.cacheReadTokens + u.cacheWriteTokens > 0
        ? `, cache read ${u.cacheReadTokens}, cache write ${u.cacheWriteTokens}`
        : "";
    const estimated = c.usageEstimated === true ? " (estimated)" : "";
    lines.push(`  tokens: ${u.inputTokens} in, ${u.outputTokens} out${cache}${estimated}`);
  }
  if (c.price !== undefined) lines.push(`  price: ${formatUsd(c.price.usd)} (${c.price.source})`);
  if (c.severed !== undefined) lines.push(`  severed by a budget mid-stream: ${c.severed}`);
  return lines.join("\n");
}

function messageLines(m: LlmMessage): string[] {
  if (m.role === "tool") return [`  [tool ${m.toolCallId}] ${m.content}`];
  const lines = [`  [${m.role}] ${m.content}`];
  if (m.role === "assistant")
    for (const t of m.toolCalls ?? []) lines.push(`    ${toolCallText(t)}`);
  return lines;
}

function toolCallText(t: LlmToolCall): string {
  return `tool call ${t.name} ${brief(t.input)} (id ${t.id})`;
}

function meteringText(m: ResourceSnapshot): string {
  const parts: string[] = [];
  if (m.tokens !== undefined) {
    parts.push(`tokens ${m.tokens.input ?? 0} in, ${m.tokens.output ?? 0} out`);
  }
  if (m.costUsd !== undefined) {
    parts.push(`cost ${m.costUnknown === true ? "≥ " : ""}${formatUsd(m.costUsd)}`);
  } else if (m.costUnknown === true) parts.push("cost unknown (could not be priced)");
  if (m.wallMs !== undefined) parts.push(`wall ${ms(m.wallMs)}`);
  if (m.ms !== undefined) parts.push(`cpu ${ms(m.ms)}`);
  return parts.join(", ");
}

function ms(v: number | undefined): string {
  return v === undefined ? "-" : `${v} ms`;
}
