/**
 * What a cancel appends: each running step metered (an estimate: its wall time and what it
 * reported so far) and cancelled, then EXECUTION_CANCELLED. Pure: the run (run.ts) and the
 * canceller (cancel.ts) both build the batch from the state they hold.
 *
 * C3 (issue 20): a running attempt that reserved under a budget (fold/steps.ts S3) and reports
 * nothing so far (it does not report, or the canceller is another process) is charged its
 * reservation, against the nested budgets it reserved under too: what it really spent before
 * its abort reached it is unknown, and the reservation bounds it.
 */
import { CancelledError, errorToData, type LoomError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { ResourceDelta } from "../kernel/resources.ts";
import type { ExecutionState, Frame } from "../fold/state.ts";
import type { EventSpec } from "./journal.ts";

export function cancelSpecs(
  state: ExecutionState,
  reason: Json,
  nowMs: number,
  cause: LoomError = new CancelledError(
    `execution "${state.executionId}" was cancelled: ${typeof reason === "string" ? reason : JSON.stringify(reason)}`,
  ),
  /** What a running attempt reports it has cost so far (this process's runs only). */
  provisional: Provisional = () => undefined,
): EventSpec[] {
  const error = errorToData(cause) as unknown as Json;
  const specs: EventSpec[] = [];
  for (const [callId, f] of Object.entries(state.frames)) {
    if (f.kind !== "step" || f.status !== "started") continue;
    // A step in its retry backoff runs nothing; one running is metered since its attempt began.
    if (f.retryAtMs === undefined) specs.push(runningCharge(callId, f, nowMs, provisional));
    specs.push({ kind: "STEP_CANCELLED", payload: { callId, error } });
  }
  specs.push({ kind: "EXECUTION_CANCELLED", payload: { reason, error }, kernel: true });
  return specs;
}

/**
 * C4 (issue 20): what a body that ends (completed or failed) with reserving calls still running
 * owes for them, appended before its terminal event: each admitted call (it holds its
 * reservation, run-reservations.ts) is charged what it reported so far, else its reservation.
 * Their own metering would come after the end, and nothing folds there.
 */
export function endSpecs(
  state: ExecutionState,
  nowMs: number,
  run: EndingRun,
  end: EventSpec,
): EventSpec[] {
  if (state.inFlight === 0) return [end];
  const specs: EventSpec[] = [];
  for (const [callId, f] of Object.entries(state.frames)) {
    if (f.kind !== "step" || f.status !== "started" || f.reserved === undefined) continue;
    if (!run.reservations.holds(callId)) continue; // not admitted yet, or refused: spends nothing
    if (f.retryAtMs === undefined) {
      specs.push(runningCharge(callId, f, nowMs, (id) => run.provisional(id)));
    }
  }
  specs.push(end);
  return specs;
}

type Provisional = (callId: string) => ResourceDelta | undefined;

/** The run whose end this is, as endSpecs sees it (Run implements it). */
export interface EndingRun {
  provisional(callId: string): ResourceDelta | undefined;
  readonly reservations: { holds(callId: string): boolean };
}

/** What a running attempt is metered when it is cut off: C3. */
function runningCharge(
  callId: string,
  f: Frame,
  nowMs: number,
  provisional: Provisional,
): EventSpec {
  // A running step's frame always holds its start (only a settled call's may not: settled.ts L4).
  const began = f.attemptStartedAt ?? f.firstStartedAt ?? nowMs;
  // What the attempt says it spent so far (a stream's tokens), else its reservation (C3), then
  // its wall time.
  const delta = {
    ...(provisional(callId) ?? f.reserved?.delta),
    wallMs: Math.max(0, nowMs - began),
    estimated: true,
  };
  const payload: { [k: string]: Json } = { callId, delta: delta as unknown as Json };
  if (f.reserved?.budgets?.length) payload.budgets = f.reserved.budgets;
  return { kind: "RESOURCE_METERED", payload };
}
