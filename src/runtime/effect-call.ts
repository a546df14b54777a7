/**
 * The pieces of a step that run an effect: what an attempt collects, the context its code and
 * its middleware see, and the budgets in force around it.
 *
 * A step is on the hot path of every turn, so its per-call objects are class instances (their
 * methods live on the prototype) rather than object literals full of fresh closures.
 */
import { CRASHED_ATTEMPT } from "../fold/metering.ts";
import { raceAbort, reasonOf } from "../effects/delay.ts";
import type { Clock } from "../kernel/clock.ts";
import { ExecutionEndedError, InvalidInputError, errorToData } from "../kernel/errors.ts";
import { isTerminalStatus, type StepNote } from "../kernel/events.ts";
import { boundedJson, copyJson, isPlainObject, type Json } from "../kernel/json.ts";
import type { PriceTable } from "../kernel/prices.ts";
import type { DeltaBus } from "../effects/deltas.ts";
import { addResources, type ResourceDelta, type ResourceSnapshot } from "../kernel/resources.ts";
import {
  addDelta,
  type BudgetInForce,
  type ExecuteOptions,
  type MiddlewareContext,
} from "../effects/middleware.ts";
import { budgetsInForce, type NestedBudget } from "./budgets-in-force.ts";
import type { ContextDeps } from "./context-deps.ts";
import type { EffectContext, LimiterClaim, StepAttributes } from "../effects/effect.ts";
import { merged, type EventSpec, type Run } from "./run.ts";
import type { StepSpan } from "./tracing.ts";

/**
 * What the current attempt of a step collects: what `meter()` reported, and the kernel facts
 * middleware emitted, written in the same append as the attempt's settling event. `failed` and
 * `next` record a failed attempt and start the next one (retry).
 */
export interface StepAttempt {
  reported: ResourceDelta;
  facts: EventSpec[];
  /** Runs the step's own code under its signal (pre-flight check, timeout race). */
  invoke<R>(work: () => R | Promise<R>): Promise<R>;
  failed(error: unknown, retryInMs: number): Promise<void>;
  next(): Promise<void>;
}

/** A step's timeout (K8.1): when it passes on the runtime clock, and what it fails with. */
export interface StepTimeout {
  timeoutMs: number;
  atMs: number;
  /** The runtime clock, for armDeadline. */
  clock: Clock;
  error(): Error;
  passed(): boolean;
}

/**
 * Counts an attempt, after `before` (a crashed attempt's charge): durable first for an
 * at-most-once or reserving step, else with the next commit.
 */
export async function startAttempt(
  run: Run,
  payload: { [k: string]: Json },
  durable: boolean,
  before: readonly EventSpec[] = [],
): Promise<void> {
  const specs: EventSpec[] = [...before, { kind: "STEP_STARTED", payload }];
  if (durable) await run.enqueue(specs);
  else run.enqueueDetached(specs);
}

/** N1: how much one attempt may note (EffectContext.note): a few identifiers, not payloads. */
export const MAX_NOTES_PER_ATTEMPT = 16;
export const MAX_NOTE_BYTES = 16 * 1024;

/**
 * One call of a step: its attempt state (StepAttempt) and the AbortController its context hands
 * out, made on first use (most steps never read the signal, and a controller is not free).
 */
export class StepCall implements StepAttempt {
  reported: ResourceDelta = {};
  facts: EventSpec[] = [];
  controller: AbortController | undefined;
  readonly ectx: StepEffectContext;
  readonly prices: PriceTable;
  readonly deltas: DeltaBus;
  /** Notes this attempt recorded (N1); a new attempt starts from none. */
  private noted = 0;

  constructor(
    readonly run: Run,
    readonly callId: string,
    /** What a new attempt's STEP_STARTED records (`callId`, `scope`, `name`, `input`). */
    private readonly payload: { [k: string]: Json },
    private readonly meterable: boolean,
    /** Whether an attempt's start is durable before it runs (K9, C1). */
    private readonly durable: boolean,
    private readonly timeout: StepTimeout | undefined,
    /** The step's trace span, when its drive's span records (tracing.ts T1). */
    readonly span: StepSpan | undefined,
    /**
     * The runtime's prices by model name (RuntimeOptions.prices) and its live deltas
     * (effects/deltas.ts D1): its context's.
     */
    runtime: Pick<ContextDeps, "prices" | "deltas">,
  ) {
    this.prices = runtime.prices;
    this.deltas = runtime.deltas;
    this.ectx = new StepEffectContext(this, run.state.frames[callId]?.attempts ?? 1);
    span?.attempt(this.ectx.attempt);
  }

  signal(): AbortSignal {
    return (this.controller ??= this.run.controller()).signal;
  }

  meter(delta: ResourceDelta): void {
    if (!this.meterable) {
      throw new InvalidInputError(
        "meter() reports an effect's cost to its metering: run the effect with ctx.execute (ctx.run steps are not metered)",
      );
    }
    this.reported = addDelta(this.reported, delta);
  }

  provisional(soFar: () => ResourceDelta | undefined): void {
    if (this.meterable) this.run.provisionals.set(this.callId, soFar);
  }

  /**
   * N1 (issue 21): a fact of the running attempt, durable before it resolves: the step's start
   * (if it was deferred, R9) and a STEP_NOTED `{ callId, attempt, note }` in one batch. Refused
   * (InvalidInputError, nothing written) when it is not a plain object of JSON values within
   * MAX_NOTE_BYTES, past MAX_NOTES_PER_ATTEMPT, or once the step has settled; rejected with the
   * run's stop once the run stopped.
   */
  async note(fact: { [k: string]: Json }): Promise<void> {
    const what = `a note of step "${this.callId}"`;
    if (!isPlainObject(fact)) {
      throw new InvalidInputError(`${what} must be a plain object of JSON values`);
    }
    const note = boundedJson(fact, what, MAX_NOTE_BYTES) as { [k: string]: Json };
    if (this.noted >= MAX_NOTES_PER_ATTEMPT) {
      throw new InvalidInputError(
        `${what}: an attempt may note at most ${MAX_NOTES_PER_ATTEMPT} facts (note identifiers, not payloads)`,
      );
    }
    const frame = this.run.state.frames[this.callId];
    const running = frame?.kind === "step" && frame.status === "started";
    const start = this.run.takeStart(this.callId);
    if (start === undefined && !running) {
      throw new InvalidInputError(`${what}: the step has settled; only a running attempt notes`);
    }
    this.noted++;
    const noted: EventSpec = {
      kind: "STEP_NOTED",
      payload: { callId: this.callId, attempt: this.ectx.attempt, note },
    };
    await this.run.enqueue(start ? [{ kind: "STEP_STARTED", payload: start }, noted] : [noted]);
  }

  /** What the step's attempts noted so far (N1), a copy. */
  notes(): StepNote[] {
    const notes = this.run.state.frames[this.callId]?.notes;
    return notes === undefined ? [] : copyJson(notes);
  }

  // K8.1: code whose signal already aborted is not started; with a timeout, the code is raced
  // against the signal, so an attempt that ignores it still ends on time.
  invoke<R>(work: () => R | Promise<R>): Promise<R> {
    if (this.controller?.signal.aborted) return Promise.reject(reasonOf(this.controller.signal));
    // A1 (run-attempts.ts): the run ended or stopped while the attempt waited (its durable
    // start, its admission): its code never starts.
    if (!this.run.live) return Promise.reject(reasonOf(this.signal()));
    const running = Promise.resolve().then(work);
    if (this.timeout === undefined) return running;
    return raceAbort(running, this.signal()).catch((e: unknown) => {
      // Cut short by its timeout before it could meter: what it reported so far counts, else
      // what it reserved (C5, as a crash or a cancel would charge it).
      const soFar = this.signal().aborted
        ? (this.run.provisional(this.callId) ?? this.reservedDelta())
        : undefined;
      if (soFar) this.reported = addDelta(this.reported, { ...soFar, estimated: true });
      throw e;
    });
  }

  /** What the attempt reserved under a budget (C1), as its start records it. */
  private reservedDelta(): ResourceDelta | undefined {
    const reserved = this.payload.reserved;
    return isPlainObject(reserved) && isPlainObject(reserved.delta)
      ? addResources({}, reserved.delta)
      : undefined;
  }

  // A failed attempt is a fact before the backoff starts (retry.ts); the step stays open.
  async failed(error: unknown, retryInMs: number): Promise<void> {
    const facts = this.facts;
    this.facts = [];
    this.span?.retry(this.ectx.attempt, error, retryInMs);
    const failed = merged(this.run.takeStart(this.callId), {
      callId: this.callId,
      error: errorToData(error) as unknown as Json,
      attempt: this.ectx.attempt,
      retryInMs,
      retrying: true,
    });
    await this.run.enqueue([...facts, { kind: "STEP_FAILED", payload: failed }]);
  }

  async next(): Promise<void> {
    const run = this.run;
    if (!run.live || isTerminalStatus(run.state.status)) {
      throw new ExecutionEndedError(
        `execution "${run.id}" ended during the backoff of step "${this.callId}": no further attempt`,
      );
    }
    this.ectx.nextAttempt();
    this.noted = 0;
    this.span?.attempt(this.ectx.attempt);
    await startAttempt(run, this.payload, this.durable);
  }
}

/** What a step's code sees of its call (EffectContext); `attempt` counts up on a retry. */
class StepEffectContext implements EffectContext {
  readonly executionId: string;
  readonly stepId: string;
  readonly idempotencyKey: string;
  readonly prices: PriceTable;
  readonly #call: StepCall;
  #resources: ResourceSnapshot | undefined;

  constructor(
    call: StepCall,
    public attempt: number,
  ) {
    this.#call = call;
    this.executionId = call.run.id;
    this.stepId = call.callId;
    this.idempotencyKey = `${call.run.id}/${call.callId}`;
    this.prices = call.prices;
  }

  get signal(): AbortSignal {
    return this.#call.signal();
  }

  /** Present only while the step's span records (EffectContext.annotate). */
  get annotate(): ((attributes: StepAttributes) => void) | undefined {
    return this.#call.span?.annotate;
  }

  /** A copy of what the execution had spent, made on first use in each attempt. */
  get resources(): ResourceSnapshot {
    return (this.#resources ??= copyJson(this.#call.run.state._resources ?? {}));
  }

  meter(delta: ResourceDelta): void {
    this.#call.meter(delta);
  }

  provisional(soFar: () => ResourceDelta | undefined): void {
    this.#call.provisional(soFar);
  }

  note(fact: { [k: string]: Json }): Promise<void> {
    return this.#call.note(fact);
  }

  publishDelta(text: string): void {
    this.#call.deltas.publish(this.executionId, { stepId: this.stepId, text });
  }

  get notes(): readonly StepNote[] {
    return this.#call.notes();
  }

  nextAttempt(): void {
    this.attempt++;
    this.#resources = undefined;
  }
}

/** The context every middleware of an effect sees; `invoke` runs the effect itself. */
export function makeMiddlewareContext(
  run: Run,
  deps: ContextDeps,
  nested: readonly NestedBudget[],
  effect: string,
  options: ExecuteOptions,
  ectx: EffectContext,
  attempt: StepAttempt,
  invoke: () => Promise<unknown>,
  declared: {
    readonly reservation?: ResourceSnapshot | undefined;
    readonly unpriced?: string | undefined;
    readonly limiter?: LimiterClaim | undefined;
  } = {},
): MiddlewareContext {
  const { reservation, unpriced, limiter } = declared;
  let budgets: { seq: number; inForce: BudgetInForce[] } | undefined;
  // Methods, not arrow-valued properties: the TS runner names every named arrow it creates.
  return {
    executionId: ectx.executionId,
    stepId: ectx.stepId,
    get attempt() {
      return ectx.attempt;
    },
    idempotencyKey: ectx.idempotencyKey,
    get signal() {
      return ectx.signal;
    },
    get resources() {
      return ectx.resources;
    },
    get annotate() {
      return ectx.annotate;
    },
    prices: ectx.prices,
    meter(delta) {
      ectx.meter(delta);
    },
    provisional(soFar) {
      ectx.provisional?.(soFar);
    },
    effect,
    options,
    // Read afresh once the log moved (a failed attempt's spend), else reused within the attempt.
    get budgets() {
      if (budgets?.seq !== run.state.seq) {
        budgets = { seq: run.state.seq, inForce: budgetsInForce(run, nested) };
      }
      // What other calls hold changes without the log moving: read it afresh (H3).
      if (run.reservations.size === 0) return budgets.inForce;
      return budgets.inForce.map((b) => ({
        ...b,
        held: run.reservations.heldAgainst(b.name, ectx.stepId),
      }));
    },
    reservation,
    unpriced,
    limiter,
    hold() {
      if (reservation === undefined) return;
      const names = budgetsInForce(run, nested).map((b) => b.name);
      run.reservations.hold(ectx.stepId, reservation, names);
    },
    metered() {
      return attempt.reported;
    },
    emit(kind, payload) {
      checkEmitted(kind, payload, ectx.stepId);
      attempt.facts.push({ kind, payload });
      // What was metered is reported once: the next attempt starts from nothing.
      if (kind === "RESOURCE_METERED") attempt.reported = {};
    },
    now() {
      return deps.now();
    },
    invoke,
    failedAttempt(error, retryInMs) {
      return attempt.failed(error, retryInMs);
    },
    beginAttempt() {
      return attempt.next();
    },
  };
}

/**
 * M1 (issue 20): a middleware records facts of its own call only, and only the two kinds it may:
 * what the call cost, and a refusal. Anything else (a decision, a crashed attempt's charge, a fact
 * about another call) could raise a budget or clear a reservation, and is InvalidInputError.
 */
function checkEmitted(kind: string, payload: { [k: string]: Json }, callId: string): void {
  const problem =
    kind !== "RESOURCE_METERED" && kind !== "QUOTA_EXCEEDED"
      ? `a middleware may emit RESOURCE_METERED or QUOTA_EXCEEDED, not ${JSON.stringify(kind)}`
      : payload.callId !== callId
        ? `a middleware's ${kind} must name its own call (callId ${JSON.stringify(callId)})`
        : payload.estimated === CRASHED_ATTEMPT
          ? "a crashed attempt's charge is the runtime's to record"
          : undefined;
  if (problem !== undefined) throw new InvalidInputError(problem);
}
