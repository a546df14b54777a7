/**
 * A call's panel (`GET /api/executions/:id/call?call=<callId>`, api-types.ts StepDetail): its
 * input, its output or error, its attempts with their errors and durations, what it metered
 * and its price, its taint marks, "sealed" when its payloads are sealed, and a fork from just
 * before it. An LLM call shows as its conversation (conversation.ts). An error the API answers
 * is shown in the panel; the page goes on.
 */
import type { StepDetail } from "../api-types.ts";
import { api, apiPath, errorBox } from "./api.ts";
import { conversationView } from "./conversation.ts";
import { fill, h, type Kid } from "./dom.ts";
import { fmtAmount, fmtDuration } from "./format.ts";
import { jsonBlock, timeEl } from "./widgets.ts";

function attempts(s: StepDetail): Kid {
  if (s.attempts.length === 0) return h("p", { class: "muted" }, "No attempt recorded.");
  return h(
    "ol",
    { class: "attempts", "aria-label": "Attempts" },
    s.attempts.map((a) =>
      h(
        "li",
        { "data-testid": "attempt" },
        `attempt ${a.attempt}: `,
        timeEl(a.startedAtMs),
        `, ${a.durationMs === undefined ? "no end recorded" : `took ${fmtDuration(a.durationMs)}`}`,
        a.error
          ? h("span", { class: "error-text" }, ` — ${a.error.code}: ${a.error.message}`)
          : null,
      ),
    ),
  );
}

function metering(s: StepDetail): Kid {
  const m = s.metering;
  const parts: string[] = [];
  if (m.tokens) parts.push(`tokens ${m.tokens.input ?? 0} in / ${m.tokens.output ?? 0} out`);
  for (const k of ["costUsd", "ms", "wallMs", "memBytes", "netBytes"] as const) {
    const v = m[k];
    if (typeof v === "number") parts.push(`${k} ${fmtAmount(k, v)}`);
  }
  for (const [k, v] of Object.entries(m.custom ?? {})) parts.push(`${k} ${v}`);
  if (m.costUnknown) parts.push("(some cost could not be priced)");
  return h(
    "p",
    { "data-testid": "metering" },
    parts.length > 0 ? parts.join(", ") : "Nothing metered.",
  );
}

function taint(s: StepDetail): Kid {
  if (s.taint.length === 0) return null;
  return [
    h("h4", {}, "Taint marks"),
    h(
      "ul",
      { class: "taint", "aria-label": "Taint marks", "data-testid": "taint" },
      s.taint.map((t) => h("li", {}, `${t.where} ${t.path || "(whole)"}: from ${t.source}`)),
    ),
  ];
}

function stepBody(s: StepDetail, fork: ((seq: number) => void) | null): Kid[] {
  return [
    h(
      "p",
      {},
      h("strong", { class: "mono" }, s.name),
      ` — ${s.kind}, ${s.status}`,
      s.durationMs === undefined ? "" : `, ${fmtDuration(s.durationMs)}`,
      s.scope ? h("span", { class: "muted" }, ` in ${s.scope}`) : null,
      s.sealed ? h("span", { class: "badge sealed", "data-testid": "sealed" }, "sealed") : null,
    ),
    s.llm ? conversationView(s.llm) : null,
    h("h4", {}, "Input"),
    s.sealed && s.input === undefined
      ? h("p", { class: "muted" }, "sealed")
      : jsonBlock(s.input, { "data-testid": "step-input" }),
    s.error ? h("h4", {}, "Error") : h("h4", {}, "Output"),
    s.error
      ? h(
          "div",
          { class: "error-box", "data-testid": "step-error" },
          `${s.error.code}: ${s.error.message}`,
        )
      : jsonBlock(s.output, { "data-testid": "step-output" }),
    h("h4", {}, "Attempts"),
    attempts(s),
    h("h4", {}, "Metering"),
    metering(s),
    taint(s),
    fork && s.forkAt !== undefined
      ? h(
          "button",
          { type: "button", "data-testid": "fork-here", onclick: () => fork(s.forkAt ?? 0) },
          `Fork before this call (at ${s.forkAt})…`,
        )
      : null,
  ];
}

/** Fills `panel` with call `callId` of execution `id`; `fork` opens the fork form, or null. */
export async function showStep(
  panel: HTMLElement,
  id: string,
  callId: string,
  fork: ((seq: number) => void) | null,
): Promise<void> {
  const close = h(
    "button",
    { type: "button", class: "close", "data-testid": "step-close", "aria-label": "Close the call" },
    "×",
  );
  close.addEventListener("click", () => {
    panel.hidden = true;
    panel.replaceChildren();
  });
  panel.hidden = false;
  panel.dataset.callId = callId;
  panel.replaceChildren(
    close,
    h("h3", {}, "Call ", h("span", { class: "mono" }, callId)),
    h("p", { class: "muted" }, "Loading…"),
  );
  panel.focus();
  try {
    const s = await api<StepDetail>(`${apiPath(id)}/call?call=${encodeURIComponent(callId)}`);
    if (panel.dataset.callId !== callId) return;
    fill(panel, [
      close,
      h("h3", {}, "Call ", h("span", { class: "mono" }, callId)),
      ...stepBody(s, fork),
    ]);
  } catch (err) {
    if (panel.dataset.callId !== callId) return;
    panel.replaceChildren(
      close,
      h("h3", {}, "Call ", h("span", { class: "mono" }, callId)),
      errorBox(err),
    );
  }
}
