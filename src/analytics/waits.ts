/**
 * Why an execution waits, in words, the same in `loom ls` and on the dashboard (issue 26 item
 * 4): a queue or a rate limiter, the waiter's 1-based place, and the expected wait the runtime
 * estimated (runtime/flow-control-estimates.ts). Pure: the shape is the runtime's `WaitReason`
 * (runtime/verbs-flow-control.ts), restated here because analytics sits below the runtime.
 *
 * W1. An expected wait prints as "~N s" under a minute (at least 1 s), "~N min" under an hour,
 *     then "~N.N h"; 0 (it fits now) prints "now"; an unknown one prints "-" (never a guess).
 * W2. A queue's wait reads "queue NAME (key KEY) #POS", a limiter's "limiter NAME #POS", each
 *     followed by its expected wait when one is known.
 * W3. As a sentence (the dashboard): "waiting in queue NAME (key KEY) #POS, ~N s" or "waiting on
 *     limiter NAME #POS, ~N s"; ", fits now" for 0; nothing after the place when unknown.
 */

/** The runtime's WaitReason, as far as the words need it. */
export type WaitShown =
  | { kind: "queue"; queue: string; key?: string; position: number; expectedWaitMs?: number }
  | { kind: "limiter"; limiter: string; position: number; expectedWaitMs?: number };

/** W1 */
export function formatWait(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return "-";
  if (ms <= 0) return "now";
  if (ms < 60_000) return `~${Math.max(1, Math.round(ms / 1000))} s`;
  if (ms < 3_600_000) return `~${Math.round(ms / 60_000)} min`;
  return `~${(ms / 3_600_000).toFixed(1)} h`;
}

/** W2: "queue fc (key u1) #3" or "limiter openai:gpt-4o-mini #2". */
export function waitPlace(w: WaitShown): string {
  if (w.kind === "limiter") return `limiter ${w.limiter} #${w.position}`;
  const key = w.key === undefined ? "" : ` (key ${w.key})`;
  return `queue ${w.queue}${key} #${w.position}`;
}

/** W1, W2: the place and, when known, the expected wait: "limiter m #2 ~3 s". */
export function waitText(w: WaitShown): string {
  const expected = w.expectedWaitMs === undefined ? "" : ` ${formatWait(w.expectedWaitMs)}`;
  return `${waitPlace(w)}${expected}`;
}

/** W3: "waiting in queue fc (key u1) #3, ~12 s", "waiting on limiter m #2". */
export function waitSentence(w: WaitShown): string {
  const where = w.kind === "queue" ? `in ${waitPlace(w)}` : `on ${waitPlace(w)}`;
  const ms = w.expectedWaitMs;
  const expected = ms === undefined ? "" : ms <= 0 ? ", fits now" : `, ${formatWait(ms)}`;
  return `waiting ${where}${expected}`;
}
