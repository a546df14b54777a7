/**
 * The step machinery: the life of one step that `ctx.run` or `ctx.execute` asked for
 * (syscalls-steps.ts). The step is answered from the fold when the log settled it; else its start
 * is recorded (or deferred), its code runs as an attempt under its timeout and its span, and the
 * event that settles it (STEP_COMPLETED or STEP_FAILED, after the attempt's facts) is appended.
 *
 * Invariants kept here (tests cite them by these names):
 * - R2 (run.ts): a step the log settled is answered from the fold, never run again.
 * - R9 (run.ts): a step's start is deferred to the next group commit, unless it is at-most-once.
 * - D1 (issue 21): a recorded effect call asked again with another input is NonDeterminismError
 *   naming the call (the run stops, as for any divergence, R3), never the old call's output.
 * - K8.1, K8.3: a step's timeout counts from its first attempt's logged start, on the runtime
 *   clock; a step whose timeout passed starts no new attempt.
 * - K9: an at-most-once step interrupted after it started fails with InDoubtError, never re-runs.
 * - C1 (issue 20): an effect call that reserves under a budget in force records its reservation in
 *   its attempt's STEP_STARTED, durable before the effect runs (steps without a budget keep R9's
 *   deferred start, and no extra commit).
 * - C2 (issue 20): a recovered step whose last attempt started with a reservation and never
 *   settled (fold/steps.ts S3) is charged that reservation, marked `estimated: "crashed-attempt"`,
 *   in the batch that starts its next attempt or settles it, so K crashes of one call charge K
 *   reservations and admission refuses once the budget is spent.
 * - C5 (issue 20, effect-call.ts): an attempt its timeout cuts short is metered what it reported
 *   so far, else its reservation: what it spent before the abort is unknown, and bounded by it.
 * - T3, T4 (tracing.ts): a step that runs in this drive runs under its span, which its drive ends
 *   if the run ends first.
 * The step path is hot: nothing here allocates or awaits what the step does not need.
 */
import { inFlowScope } from "./flow-scope.ts";
import { abortableDelay } from "../effects/delay.ts";
import {
  InDoubtError,
  NonDeterminismError,
  StepTimeoutError,
  errorFromData,
  errorToData,
  isLoomError,
} from "../kernel/errors.ts";
import { boundedJson, canonicalJson, isPlainObject, type Json } from "../kernel/json.ts";
import type { ResourceSnapshot } from "../kernel/resources.ts";
import { taint } from "../kernel/taint.ts";
import { CRASHED_ATTEMPT } from "../fold/metering.ts";
import { callFrame, keptValue } from "../fold/settled.ts";
import { stepHeadOf } from "../fold/steps.ts";
import type { Reserved } from "../fold/state.ts";
import type { RunOptions } from "./contract.ts";
import type { ContextDeps } from "./context-deps.ts";
import { armDeadline, remainingMs } from "./deadline.ts";
import { startAttempt, StepCall, type StepAttempt, type StepTimeout } from "./effect-call.ts";
import type { EffectContext } from "./flow.ts";
import { halted, merged, type EventSpec, type Run } from "./run.ts";
import { own, type Scope } from "./syscalls-scope.ts";

export interface StepOptions extends RunOptions {
  /** An effect through the middleware chain (it may meter). */
  meterable?: boolean;
  /** What one attempt may spend at most (Effect.reserve), recorded under a budget (C1). */
  reservation?: ResourceSnapshot | undefined;
}

/** A value the sealing store made of a payload whose subject's key was destroyed (V7). */
function isTombstone(value: Json | undefined, erased: readonly string[] | undefined): boolean {
  if (!isPlainObject(value) || erased === undefined) return false;
  const keys = Object.keys(value);
  const subject = value.$erased;
  return keys.length === 1 && typeof subject === "string" && erased.includes(subject);
}

/** D1: the input a recorded call is asked with again must be the one it recorded. */
function sameInput(
  run: Run,
  callId: string,
  recorded: Json | undefined,
  asked: Json | undefined,
): void {
  if (recorded === undefined && asked === undefined) return;
  // A payload whose data subject was erased reads as a tombstone: nothing to compare. Only the
  // sealing store's own (exactly `{ $erased: subject }`, of a subject this log records as
  // erased): content shaped like one is compared like any other input.
  if (isTombstone(recorded, run.state._erased)) return;
  if (
    recorded !== undefined &&
    asked !== undefined &&
    canonicalJson(recorded) === canonicalJson(asked)
  ) {
    return;
  }
  const error = new NonDeterminismError(
    `execution "${run.id}" of flow "${run.flow.name}": step "${callId}" was recorded with another input than the flow now gives it; a flow that changes what it passes to a call declares a new version`,
    { executionId: run.id, callId },
  );
  run.stop(error);
  throw error;
}

/** No facts before a start: shared, so the step path allocates nothing for it. */
const NO_FACTS: readonly EventSpec[] = Object.freeze([]);

/** A step's code: an effect through its chain, or a `ctx.run` function. */
type StepFn<T> = (ectx: EffectContext, attempt: StepAttempt) => Promise<T> | T;

/**
 * One step of scope `s`, from its claim to its settling event: resolves with its output, or
 * rejects with its error (recorded), or halts when the run stopped (R6).
 */
export async function step<T>(
  s: Scope,
  name: string,
  input: Json | undefined,
  hasInput: boolean,
  fn: StepFn<T>,
  opts: StepOptions = {},
): Promise<T> {
  const { run, deps, scope } = s;
  const claim = run.claim(scope, "step", name);
  const callId = claim.callId;
  // Kept by its value alone, it completed at its first attempt (settled.ts L2): no frame is made.
  const kept = claim.recorded && !hasInput ? keptValue(run.state, "step", callId) : undefined;
  const frame = claim.recorded && kept === undefined ? callFrame(run.state, callId) : undefined;
  if (frame && hasInput) sameInput(run, callId, frame.input, input); // D1
  if (kept !== undefined || frame?.status === "completed") {
    return own(kept !== undefined ? kept : frame?.output) as T;
  }
  if (frame && frame.status !== "started") throw errorFromData(frame.error);
  const payload = startOf(s, callId, name, hasInput ? input : undefined, opts.reservation);
  claim.take();
  await run.committed(); // R1: what the body was handed (a step's result) is durable
  // K8.3: the timeout counts from the first attempt's logged start, on the runtime clock.
  const timeout = stepTimeout(deps, run.id, callId, opts.timeoutMs, frame?.firstStartedAt);
  // At-most-once (K9) or reserving (C1): the start is durable before the effect runs.
  const durable = opts.atMostOnce === true || payload.reserved !== undefined;
  // C2: its last attempt started with a reservation and never settled.
  const crashed =
    frame?.reserved === undefined ? NO_FACTS : [crashedCharge(callId, frame.reserved)];
  if (frame && opts.atMostOnce === true && frame.retryAtMs === undefined) {
    // K9: its last attempt started and never settled; whether it took effect is unknown.
    return settleFailed<T>(run, callId, inDoubt(run, callId), crashed);
  }
  if (frame) {
    // Recovered between attempts: the recorded backoff still holds (retry.ts), but not past
    // the timeout; a step whose timeout passed starts no new attempt (K8.1 pre-flight).
    const due = Math.min(frame.retryAtMs ?? -Infinity, timeout?.atMs ?? Infinity);
    if (!(await retryDue(run, deps, Number.isFinite(due) ? due : undefined))) return halted();
    if (timeout?.passed()) return settleFailed<T>(run, callId, timeout.error(), crashed);
    // A re-run of a step whose start was recorded counts an attempt at once.
    await startAttempt(run, payload, durable, crashed);
  } else if (durable) {
    // Durable before the effect runs, so a crash leaves it in doubt (K9) or charged (C2).
    await startAttempt(run, merged(payload, { startedAt: deps.now() }), true);
  } else {
    run.deferStart(callId, payload); // R9
  }
  const attempt = new StepCall(
    run,
    callId,
    payload,
    opts.meterable === true,
    durable,
    timeout,
    run.trace?.step(callId, name, opts.meterable === true ? "effect" : "run"), // T3
    deps,
  );
  const disarm = timeout === undefined ? undefined : armTimeout(attempt, timeout);
  let outcome: { output: Json | undefined } | { error: unknown };
  try {
    const meterable = opts.meterable === true;
    // Under its span when it has one (T3): spans made by the step's code are its children.
    const value = await (attempt.span
      ? attempt.span.within(() => callStep(fn, attempt.ectx, attempt, meterable))
      : callStep(fn, attempt.ectx, attempt, meterable));
    // Wrapped before it is recorded: the log, and so every replay, holds the mark.
    const marked = opts.taint === undefined ? value : taint(value, opts.taint);
    outcome = { output: stepBound(deps, marked, `output of step "${callId}"`) };
  } catch (e) {
    outcome = { error: e };
  } finally {
    disarm?.();
    if (attempt.controller) run.release(attempt.controller);
    run.provisionals.delete(callId);
    run.reservations.release(callId); // H2
  }
  // A run that ended or stopped meanwhile ended this step's span with its drive (T4).
  if (!run.live) return halted();
  if ("error" in outcome) {
    attempt.span?.failed(outcome.error);
    return settleFailed<T>(
      run,
      callId,
      outcome.error,
      withQuotaFact(callId, outcome.error, attempt.facts),
    );
  }
  attempt.span?.completed();
  await handOver(run, run.enqueue(completedSpecs(run, callId, outcome.output, attempt.facts)));
  return own(outcome.output) as T;
}

/**
 * R1: a step's result goes to the body once its event is queued (so an end reached before the
 * flush shares its commit) only when nothing else of the body runs: beside an open ctx.parallel
 * branch or another step in flight, whose code could read it from the body's variables while it
 * runs, it goes only once committed. A failed commit stops the run either way (R5).
 */
async function handOver(run: Run, committed: Promise<void>): Promise<void> {
  if (run.openBranches() > 0 || run.state.inFlight > 0) return committed;
  committed.catch(() => undefined);
}

/** Arms a step's timeout (K8.1): its signal aborts with the timeout's error once it passes. */
function armTimeout(attempt: StepCall, timeout: StepTimeout): (() => void) | undefined {
  const abort = () => attempt.controller?.abort(timeout.error());
  attempt.signal();
  if (timeout.passed()) abort();
  else return armDeadline(timeout.clock, timeout.atMs, timeout.timeoutMs, abort);
  return undefined;
}

/** What completes a step: the attempt's facts, then STEP_COMPLETED. */
function completedSpecs(
  run: Run,
  callId: string,
  output: Json | undefined,
  facts: EventSpec[],
): EventSpec[] {
  // The start's fields first, as when it was spread: `callId` keeps its place among them.
  const done: { [k: string]: Json } = run.takeStart(callId) ?? {};
  done.callId = callId;
  if (output !== undefined) done.output = output;
  return facts.length === 0
    ? [{ kind: "STEP_COMPLETED", payload: done }]
    : [...facts, { kind: "STEP_COMPLETED", payload: done }];
}

/**
 * Q5 (issue 20): a call that ends in QuotaExceededError (a refusal, or a stream its guard severed)
 * leaves a QUOTA_EXCEEDED fact, whatever middleware chain is configured: the runtime adds one
 * when the chain did not, with what the error's details say.
 */
function withQuotaFact(callId: string, error: unknown, facts: EventSpec[]): EventSpec[] {
  if (!isLoomError(error, "LOOM_QUOTA_EXCEEDED")) return facts;
  const recorded = facts.some(
    (f) => f.kind === "QUOTA_EXCEEDED" && (f.payload as { callId?: unknown }).callId === callId,
  );
  if (recorded) return facts;
  const details = isPlainObject(error.details) ? error.details : {};
  const dimension = typeof details.dimension === "string" ? details.dimension : "tokens";
  return [...facts, { kind: "QUOTA_EXCEEDED", payload: { ...details, callId, dimension } }];
}

/** Records a step's failure (with the attempt's facts) and throws it to the body. */
async function settleFailed<R>(
  run: Run,
  callId: string,
  thrown: unknown,
  facts: readonly EventSpec[],
): Promise<R> {
  const error = errorToData(thrown);
  const failed = merged(run.takeStart(callId), { callId, error: error as unknown as Json });
  await run.enqueue([...facts, { kind: "STEP_FAILED", payload: failed }]);
  throw errorFromData(error);
}

/**
 * Waits until a recovered step's next attempt is due; false if the run stopped meanwhile.
 * Real time, cut short by the run stopping, like the backoff it continues.
 */
async function retryDue(
  run: Run,
  deps: ContextDeps,
  retryAtMs: number | undefined,
): Promise<boolean> {
  const wait = retryAtMs === undefined ? 0 : retryAtMs - deps.now();
  if (wait <= 0) return run.live;
  const c = run.controller();
  try {
    await abortableDelay(wait, c.signal);
    return run.live;
  } catch {
    return false;
  } finally {
    run.release(c);
  }
}

/**
 * What a step's attempts record as their start: its call, its input and its reservation (C1).
 * Its `scope` and `name` only when its call id does not give them (schema 1.11.0: fold/steps.ts
 * S5), as it always does for an id made by run-scopes.ts `claim`.
 */
function startOf(
  s: Scope,
  callId: string,
  name: string,
  input: Json | undefined,
  reservation: ResourceSnapshot | undefined,
): { [k: string]: Json } {
  const head = stepHeadOf(callId);
  const payload: { [k: string]: Json } =
    head?.scope === s.scope && head.name === name ? { callId } : { callId, scope: s.scope, name };
  if (input !== undefined) payload.input = input;
  const reserved = reservation === undefined ? undefined : reservedUnder(s, reservation);
  if (reserved !== undefined) payload.reserved = reserved as unknown as Json;
  return payload;
}

/**
 * C1: what an attempt records of its reservation: the most it may spend, and the nested budgets
 * it counts against; none when no budget is in force (nothing to hold it against).
 */
function reservedUnder(s: Scope, reservation: ResourceSnapshot): Reserved | undefined {
  if (s.nested.length === 0) {
    return s.run.state._budget === undefined ? undefined : { delta: reservation };
  }
  return { delta: reservation, budgets: s.nested.map((b) => b.name) };
}

/** C2: the charge of an attempt that started with `reserved` and never settled. */
function crashedCharge(callId: string, reserved: Reserved): EventSpec {
  const payload: { [k: string]: Json } = {
    callId,
    delta: { ...reserved.delta, estimated: true } as unknown as Json,
    estimated: CRASHED_ATTEMPT,
  };
  if (reserved.budgets !== undefined && reserved.budgets.length > 0) {
    payload.budgets = reserved.budgets;
  }
  return { kind: "RESOURCE_METERED", payload };
}

/** A step's code: an effect through its chain (which invokes it), or a `ctx.run` function. */
function callStep<T>(
  fn: StepFn<T>,
  ectx: EffectContext,
  attempt: StepAttempt,
  meterable: boolean,
): Promise<T> | T {
  // FS2: the step's code is not the flow's.
  return inFlowScope({ step: ectx.stepId }, () =>
    meterable ? fn(ectx, attempt) : attempt.invoke(() => fn(ectx, attempt)),
  );
}

/** A step's payload bounded by `limits.maxStepPayloadBytes`, as JSON. */
export function stepBound(deps: ContextDeps, value: unknown, what: string): Json | undefined {
  return boundedJson(value, what, deps.limits.maxStepPayloadBytes);
}

/**
 * A step's timeout (K8.1) when it has one, counted from `startedAtMs` (its first attempt's logged
 * start; now, for a step never started) on the runtime clock.
 */
function stepTimeout(
  deps: ContextDeps,
  executionId: string,
  callId: string,
  timeoutMs: number | undefined,
  startedAtMs: number | undefined,
): StepTimeout | undefined {
  if (timeoutMs === undefined) return undefined;
  const clock = { now: () => deps.now() };
  const atMs = (startedAtMs ?? deps.now()) + timeoutMs;
  return {
    timeoutMs,
    atMs,
    clock,
    error: () =>
      new StepTimeoutError(
        `step "${callId}" of execution "${executionId}" ran past its timeoutMs of ${timeoutMs} ms`,
      ),
    passed: () => remainingMs(clock, atMs, timeoutMs) <= 0,
  };
}

/** K9: an at-most-once step whose last attempt started and never settled. */
function inDoubt(run: Run, callId: string): InDoubtError {
  return new InDoubtError(
    `step "${callId}" of execution "${run.id}" is at-most-once and was interrupted after it started: whether it took effect is unknown, so it is not run again`,
  );
}
