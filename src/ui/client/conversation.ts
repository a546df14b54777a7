/**
 * An LLM call as its conversation (api-types.ts Conversation): the model and system prompt,
 * each message (user, assistant with its tool calls, a tool's result), the answer with its
 * tool calls, tokens in and out, cache reads and writes, the price, and "severed by budget"
 * when a budget cut the stream. Every text is a text node.
 */
import type { Conversation } from "../api-types.ts";
import type { LlmMessage, LlmToolCall } from "../../providers/llm-types.ts";
import { h, type Kid } from "./dom.ts";
import { formatUsd } from "./format.ts";

function toolCalls(calls: readonly LlmToolCall[]): Kid {
  if (calls.length === 0) return null;
  return h(
    "ul",
    { class: "tool-calls", "aria-label": "Tool calls" },
    calls.map((c) =>
      h(
        "li",
        { "data-testid": "tool-call", "data-tool": c.name },
        h("span", { class: "mono" }, `${c.name} [${c.id}]`),
        h("pre", { class: "json" }, JSON.stringify(c.input, null, 2)),
      ),
    ),
  );
}

function message(m: LlmMessage): HTMLElement {
  const head = m.role === "tool" ? `tool result for ${m.toolCallId}` : m.role;
  return h(
    "li",
    { class: `msg ${m.role}`, "data-testid": "message", "data-role": m.role },
    h("div", { class: "msg-role" }, head),
    h("div", { class: "msg-text" }, m.content),
    m.role === "assistant" ? toolCalls(m.toolCalls ?? []) : null,
  );
}

function usageLine(c: Conversation): Kid {
  const u = c.usage;
  const words: string[] = [];
  if (u) {
    words.push(`${u.inputTokens} tokens in`, `${u.outputTokens} out`);
    if (u.cacheReadTokens > 0 || u.cacheWriteTokens > 0) {
      words.push(`cache ${u.cacheReadTokens} read / ${u.cacheWriteTokens} written`);
    }
    if (c.usageEstimated) words.push("(estimated)");
  }
  if (c.price) {
    words.push(
      `price ${formatUsd(c.price.usd)} (${c.price.source}${c.price.model ? `, as ${c.price.model}` : ""})`,
    );
  }
  return words.length === 0
    ? null
    : h("p", { class: "usage", "data-testid": "llm-usage" }, words.join(", "));
}

export function conversationView(c: Conversation): HTMLElement {
  return h(
    "section",
    { class: "conversation", "aria-label": "Conversation", "data-testid": "conversation" },
    h("p", {}, "Model: ", h("span", { class: "mono" }, c.model ?? "(not recorded)")),
    c.severed
      ? h(
          "p",
          { class: "badge refused severed", "data-testid": "severed", role: "note" },
          `severed by budget: ${c.severed}`,
        )
      : null,
    c.system === undefined
      ? null
      : h(
          "div",
          { class: "msg system", "data-testid": "system" },
          h("div", { class: "msg-role" }, "system"),
          h("div", { class: "msg-text" }, c.system),
        ),
    h("ol", { class: "messages", "aria-label": "Messages" }, c.messages.map(message)),
    c.tools && c.tools.length > 0
      ? h("p", { class: "muted" }, `Tools offered: ${c.tools.map((t) => t.name).join(", ")}`)
      : null,
    c.answer
      ? h(
          "div",
          { class: "msg assistant answer", "data-testid": "answer" },
          h(
            "div",
            { class: "msg-role" },
            `answer${c.answer.stopReason ? ` (${c.answer.stopReason})` : ""}`,
          ),
          h("div", { class: "msg-text" }, c.answer.text),
          toolCalls(c.answer.toolCalls),
        )
      : h("p", { class: "muted" }, "No answer recorded."),
    usageLine(c),
  );
}
