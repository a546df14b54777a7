/**
 * Tracing through `@opentelemetry/api`: a span per drive of an execution, a child span per step
 * that runs in it, and attributes an effect adds to its step's span (an LLM call's `gen_ai.*`).
 * Without a registered SDK the API's tracer is a no-op, and so is all of this. docs/tracing.md
 * lists the names and attributes.
 *
 * A drive is what one process does with one execution between two rests: from the moment a Run
 * starts its body (a new execution, or a re-run over a recorded log after a crash, a move or an
 * eviction) or is woken from the parked cache (a resume, a fired timer, a message), until it
 * parks, ends or stops. An execution that lives for a month is many drives, each a bounded span,
 * rather than one span open for a month: `loom.execution.status` says how each drive ended
 * (`parked`, `completed`, `stopped`, ...), and `loom.execution.replayed` / `loom.execution.resumed`
 * say how it began.
 *
 * Invariants (test/tracing.test.ts cites T1..T5):
 * T1. No recording, no cost: when a drive's span does not record (no SDK, or not sampled), its
 *     steps start no span and no attribute object is built; what a step pays is one property
 *     read. The tracer is looked up once per runtime, so an SDK registered later is still used.
 * T2. One span per drive, parented on the context active where the drive began (the caller of
 *     `start` or `resume`, when a context manager carries one), and ended when the drive ends.
 * T3. A step span exists only for a step that runs in this drive: a step the log answers is
 *     replayed without one. Its parent is passed explicitly (no AsyncLocalStorage is assumed);
 *     the step's code runs with it active, for whatever context manager is registered.
 * T4. Every span is ended once: a step span still open when its drive ends (the execution was
 *     cancelled or stopped under it) is ended then, `loom.step.cancelled`.
 * T5. Tracing records nothing in the log (G2) and reads no clock of Loom's: span times are the
 *     tracer's own wall clock, not the runtime clock.
 * T6. An error is named on a span by its type (`error.type`) and its code (`loom.error.code`,
 *     when it has one). Its message and stack go on the span too, unless a codec seals the log:
 *     then they never do (status, exception event, retry event), since a message may quote what
 *     the codec seals, and a span is exported outside it. The status message is then the code,
 *     or the type.
 */
import {
  SpanKind,
  SpanStatusCode,
  context as otelContext,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
  type TracerProvider,
} from "@opentelemetry/api";
import { RuntimeClosedError } from "../kernel/errors.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { StepAttributes } from "../effects/effect.ts";

/** The instrumentation scope of Loom's spans. */
export const TRACER_NAME = "loomwork";

const INTERNAL = Object.freeze({ kind: SpanKind.INTERNAL });

/** How a drive began: a new body, a body re-run over a recorded log, or a parked one woken. */
export type DriveStart = "start" | "replay" | "resume";

/** The runtime's tracer (one per runtime). */
export class Tracing {
  private readonly tracer: Tracer;

  constructor(
    provider: TracerProvider = trace.getTracerProvider(),
    /** True when a codec seals the log: spans name errors without their messages (T6). */
    private readonly sealed = false,
  ) {
    this.tracer = provider.getTracer(TRACER_NAME);
  }

  /** Opens the span of a drive; undefined when it does not record (T1). */
  drive(state: ExecutionState, how: DriveStart): DriveSpan | undefined {
    const parent = otelContext.active();
    const span = this.tracer.startSpan(`loom.execution ${state.flow}`, INTERNAL, parent);
    // Its attributes are built only now, once it is known to record: a sampler sees the name.
    if (!span.isRecording()) return undefined;
    const attributes: Attributes = {
      "loom.execution.id": state.executionId,
      "loom.flow": state.flow,
      "loom.flow.version": state.flowVersion,
      "loom.execution.replayed": how === "replay",
    };
    if (how === "resume") attributes["loom.execution.resumed"] = true;
    if (state._chain) {
      attributes["loom.chain.id"] = state._chain.chainId;
      attributes["loom.chain.generation"] = state._chain.generation;
    }
    if (state._parent) attributes["loom.parent.execution.id"] = state._parent.executionId;
    // Issue 26: the queue it waited in, and how long (the time spent waiting on a limiter is on
    // the step's span: runtime/rate-limits.ts RL7).
    if (state._queue) {
      attributes["loom.queue.name"] = state._queue.name;
      if (state._queue.waitedMs !== undefined) {
        attributes["loom.queue.waited_ms"] = state._queue.waitedMs;
      }
    }
    span.setAttributes(attributes);
    return new DriveSpan(this.tracer, span, trace.setSpan(parent, span), this.sealed);
  }
}

/** The span of one drive, and the spans of the steps running under it. */
export class DriveSpan {
  private readonly open = new Set<StepSpan>();

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    /** The drive's span in its parent's context: what every step span is started under (T3). */
    private readonly ctx: Context,
    private readonly sealed: boolean,
  ) {}

  /** A span for a step that runs now (T3). */
  step(callId: string, name: string, kind: "effect" | "run"): StepSpan {
    const span = this.tracer.startSpan(
      `loom.step ${name}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          "loom.step.id": callId,
          "loom.step.name": name,
          "loom.step.kind": kind,
        },
      },
      this.ctx,
    );
    const step = new StepSpan(span, this.open, trace.setSpan(this.ctx, span), this.sealed);
    this.open.add(step);
    return step;
  }

  /**
   * Ends the drive as the state says (parked, or its terminal status), or as stopped by `stop`;
   * step spans still open are ended as cancelled, by `stop` or `cut` (what aborted them, T4).
   */
  end(state: ExecutionState, stop?: Error, cut?: Error): void {
    const status = stop ? "stopped" : state.status;
    const span = this.span;
    span.setAttribute("loom.execution.status", status);
    if (stop) span.setAttribute("loom.execution.stop_reason", stop.name);
    if (state.status === "continued" && state._continuedTo !== undefined) {
      span.setAttribute("loom.execution.continued_to", state._continuedTo);
    }
    const error = errorOfDrive(state, stop);
    if (error) failedWith(span, error, this.sealed);
    for (const step of [...this.open]) {
      step.cancelled(stop ?? cut ?? new Error(`execution "${state.executionId}" ${status}`));
    }
    span.end();
  }
}

/**
 * What makes a drive's span an error: a failed or cancelled end, or a stop other than the
 * runtime closing (fenced, non-deterministic, cancelled from another process). Closing stops
 * runs in order, and a park or a completion is no error.
 */
function errorOfDrive(state: ExecutionState, stop: Error | undefined): Failure | undefined {
  if (stop) return stop instanceof RuntimeClosedError ? undefined : stop;
  if (state.status !== "failed" && state.status !== "cancelled") return undefined;
  return state.error ?? { name: "Error", message: `execution ${state.status}` };
}

/** The span of one running step: its retries as events, its end as a status. */
export class StepSpan {
  private ended = false;

  constructor(
    private readonly span: Span,
    private readonly open: Set<StepSpan>,
    /** The step's span in its drive's context. */
    private readonly ctx: Context,
    private readonly sealed: boolean,
  ) {}

  /**
   * Runs the step's code with this span active, so that spans made inside it (the user's own, an
   * instrumented HTTP client's) are its children, where a context manager is registered.
   */
  within<R>(work: () => R): R {
    return otelContext.with(this.ctx, work);
  }

  /** What `EffectContext.annotate` is while this span records (an arrow: handed out as is). */
  readonly annotate = (attributes: StepAttributes): void => {
    if (!this.ended) this.span.setAttributes(attributes);
  };

  /** A failed attempt that another follows in `retryInMs` (retry middleware). */
  retry(attempt: number, error: unknown, retryInMs: number): void {
    if (this.ended) return;
    const e = asError(error);
    const attributes: Attributes = {
      "loom.step.attempt": attempt,
      "loom.step.retry_in_ms": retryInMs,
      "error.type": e.name,
    };
    const code = codeOf(e);
    if (code !== undefined) attributes["loom.error.code"] = code;
    if (!this.sealed) attributes["exception.message"] = e.message; // T6
    this.span.addEvent("loom.step.retry", attributes);
  }

  /** The attempt that runs now (the first one's number is known once the step has its call). */
  attempt(attempt: number): void {
    if (!this.ended) this.span.setAttribute("loom.step.attempt", attempt);
  }

  /** The step's code returned: the outcome the body gets. */
  completed(): void {
    this.finish();
  }

  /** The step failed: the error the body gets (after any retries). */
  failed(error: unknown): void {
    if (this.ended) return;
    const e = asError(error);
    // T6: the SDK's recordException would export the message and the stack.
    if (this.sealed) this.span.addEvent("exception", { "exception.type": e.name });
    else this.span.recordException(e);
    failedWith(this.span, e, this.sealed);
    this.finish();
  }

  /** The execution ended or stopped while the step ran: its signal aborted with `reason` (T4). */
  cancelled(reason: unknown): void {
    if (this.ended) return;
    this.span.setAttribute("loom.step.cancelled", true);
    failedWith(this.span, asError(reason), this.sealed);
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.open.delete(this);
    this.span.end();
  }
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

/** An error as a span names it: a live Error, or one read back from the log (ErrorData). */
interface Failure {
  name: string;
  message: string;
  code?: unknown;
}

/** A Loom error's stable code; undefined for any other error. */
function codeOf(e: Failure): string | undefined {
  return typeof e.code === "string" && e.code !== "" ? e.code : undefined;
}

/** Marks `span` failed with `e`: its type, its code, and its message unless sealed (T6). */
function failedWith(span: Span, e: Failure, sealed: boolean): void {
  const code = codeOf(e);
  span.setAttribute("error.type", e.name);
  if (code !== undefined) span.setAttribute("loom.error.code", code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: sealed ? (code ?? e.name) : e.message });
}
