/**
 * What the simulator checks after every simulated event. Each invariant is cited by number.
 *
 * SIM1. Every log is well formed: dense sequence numbers from 0, EXECUTION_STARTED at 0, and
 *       nothing after a terminal event.
 * SIM2. A completed step is recorded once, and a step's effect starts again only if its
 *       completion was never recorded (checked when the effect starts).
 * SIM3. The fold of each log equals the state the store loads (snapshot plus tail) and the state
 *       a live runtime holds in memory for it.
 * SIM4. No budget is exceeded by more than its documented bound: admission refuses an effect once
 *       the budget is spent, so the overshoot is at most what the effects admitted concurrently
 *       before that can spend (MAX_STEP_TOKENS per branch that runs at once).
 * SIM5. A cancelled execution has no live work: CANCEL_GRACE_MS after its EXECUTION_CANCELLED,
 *       none of its effects is running or starts.
 * SIM6. A timer fires at or after its wake time, and never twice.
 * SIM7. Every execution ends once the world stops failing, answers its suspends and lets time
 *       pass (liveness).
 */
import { canonicalJson } from "../src/kernel/json.ts";
import { isTerminalEvent, type Envelope } from "../src/kernel/events.ts";
import { foldAll } from "../src/fold/fold.ts";
import type { ExecutionState } from "../src/fold/state.ts";
import { MAX_BRANCHES, MAX_STEP_TOKENS, type Op, type Spec } from "./workload.ts";

export const CANCEL_GRACE_MS = 200;

export function checkLog(id: string, log: readonly Envelope[], out: string[]): void {
  let ended = false;
  log.forEach((e, i) => {
    if (e.seq !== i) out.push(`SIM1 ${id}: sequence ${e.seq} at position ${i}`);
    if (i === 0 && e.kind !== "EXECUTION_STARTED") out.push(`SIM1 ${id}: sequence 0 is ${e.kind}`);
    if (ended) out.push(`SIM1 ${id}: ${e.kind} at ${e.seq} after a terminal event`);
    if (isTerminalEvent(e)) ended = true;
  });
  const completed = new Set<string>();
  const fired = new Set<string>();
  const wakeAt = new Map<string, number>();
  for (const e of log) {
    const p = e.payload as { callId?: unknown; wakeAtMs?: unknown };
    const callId = typeof p.callId === "string" ? p.callId : "";
    if (e.kind === "STEP_COMPLETED") {
      if (completed.has(callId)) out.push(`SIM2 ${id}: step ${callId} completed twice`);
      completed.add(callId);
    }
    if (
      (e.kind === "TIMER_SCHEDULED" || e.kind === "SUSPENDED") &&
      typeof p.wakeAtMs === "number"
    ) {
      wakeAt.set(callId, p.wakeAtMs);
    }
    if (e.kind === "TIMER_FIRED") {
      if (fired.has(callId)) out.push(`SIM6 ${id}: timer ${callId} fired twice`);
      fired.add(callId);
      const wake = wakeAt.get(callId);
      if (wake === undefined || e.at < wake) {
        out.push(`SIM6 ${id}: timer ${callId} fired at ${e.at}, before its wake time ${wake}`);
      }
    }
  }
}

export function checkFold(
  id: string,
  log: readonly Envelope[],
  loaded: ExecutionState | undefined,
  held: ExecutionState | undefined,
  out: string[],
): void {
  const whole = canonicalJson(foldAll(log));
  if (loaded && canonicalJson(loaded) !== whole)
    out.push(`SIM3 ${id}: snapshot plus tail differs from the fold`);
  if (held && held.seq === log.length - 1 && canonicalJson(held) !== whole) {
    out.push(`SIM3 ${id}: the live state differs from the fold of the log`);
  }
  if (held && held.seq > log.length - 1) {
    out.push(`SIM3 ${id}: the live state is at ${held.seq}, the log ends at ${log.length - 1}`);
  }
}

/** How many effects of a spec can run at once. */
function width(ops: readonly Op[]): number {
  let w = 1;
  for (const o of ops)
    if (o.op === "parallel") w = Math.max(w, Math.min(o.branches.length, MAX_BRANCHES));
  return w;
}

export function checkBudget(id: string, spec: Spec, state: ExecutionState, out: string[]): void {
  if (spec.budgetTokens === undefined) return;
  const spent = state._resources?.tokens?.input ?? 0;
  const bound = spec.budgetTokens + MAX_STEP_TOKENS * width(spec.ops);
  if (spent > bound)
    out.push(`SIM4 ${id}: spent ${spent} tokens, budget ${spec.budgetTokens}, bound ${bound}`);
}

/** The time of the execution's EXECUTION_CANCELLED, if it has one. */
export function cancelledAt(log: readonly Envelope[]): number | undefined {
  const last = log[log.length - 1];
  return last && last.kind === "EXECUTION_CANCELLED" && isTerminalEvent(last) ? last.at : undefined;
}
