/**
 * What a fork or a rerun made (api-types.ts MadeExecution), kept while the page goes to the new
 * execution, so that page can show its clock and budget as the action answered them.
 */
import type { MadeExecution } from "../api-types.ts";
import { h } from "./dom.ts";
import { fmtAmount, fmtDuration } from "./format.ts";
import { timeEl } from "./widgets.ts";

const made = new Map<string, MadeExecution>();

export function remember(m: MadeExecution): void {
  made.set(m.executionId, m);
}

/** When the deadline falls: `deadlineMs` counts from `startedAtMs` (api-types.ts MadeExecution). */
function deadlineAt(m: MadeExecution, deadlineMs: number): number {
  return m.startedAtMs + deadlineMs;
}

/** The note of what made execution `id`, when this page made it; else null. */
export function madeNote(id: string): HTMLElement | null {
  const m = made.get(id);
  if (m === undefined) return null;
  const budget = Object.entries(m.budget ?? {})
    .filter((e): e is [string, number] => typeof e[1] === "number")
    .map(([k, v]) => `${k} ${fmtAmount(k, v)}`)
    .join(", ");
  return h(
    "div",
    { class: "panel made", "data-testid": "made" },
    h("strong", {}, "Made just now. "),
    "Its clock starts ",
    timeEl(m.startedAtMs),
    m.deadlineMs === undefined
      ? "; no deadline"
      : [
          "; deadline ",
          timeEl(deadlineAt(m, m.deadlineMs)),
          ` (${fmtDuration(deadlineAt(m, m.deadlineMs) - m.startedAtMs)} after its start)`,
        ],
    `; budget: ${budget || "none"}`,
    ".",
  );
}
