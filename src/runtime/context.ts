/**
 * The flow context: the syscalls a flow body makes. Each call gets a deterministic id (its name
 * and occurrence in its scope) and is answered from the fold when the log already has it.
 * Every call goes through `call`, which enforces R7 (one outstanding call per scope) and halts
 * the body when its run has stopped (R6).
 */
import { checkedSchema, validated } from "../kernel/schema.ts";
import { spentWithGrants } from "../fold/children.ts";
import { abortableDelay } from "../effects/delay.ts";
import {
  InDoubtError,
  InvalidInputError,
  InvariantViolation,
  NonDeterminismError,
  StepTimeoutError,
  SuspendTimeoutError,
  TaintedInputError,
  errorFromData,
  errorToData,
} from "../kernel/errors.ts";
import { isTerminalStatus } from "../kernel/events.ts";
import { boundedJson, copyJson, type Json } from "../kernel/json.ts";
import { checkedTaintSource, findTaint, taint } from "../kernel/taint.ts";
import {
  assertName,
  checkedBudget,
  checkedExecuteOptions,
  checkedOptions,
  checkedRefusesTainted,
  type Effect,
  type EffectContext,
} from "./flow.ts";
import { halted, merged, type EventSpec, type Run } from "./run.ts";
import { chainSyscalls } from "./context-chain.ts";
import { childSyscalls } from "./children.ts";
import { armDeadline, remainingMs } from "./deadline.ts";
import {
  makeMiddlewareContext,
  startAttempt,
  StepCall,
  type NestedBudget,
  type StepAttempt,
  type StepTimeout,
} from "./effect-call.ts";
import { isDimension, spentIn, type Budget } from "../kernel/resources.ts";
import { NEGOTIATE } from "../fold/fold.ts";
import { type ExecuteOptions, type MiddlewareContext } from "../effects/middleware.ts";
import type { FlowContext, RunOptions, SuspendOptions } from "./contract.ts";
import type { ContextDeps } from "./context-deps.ts";

export type { FlowContext, RunOptions, SuspendOptions } from "./contract.ts";
export type { ContextDeps } from "./context-deps.ts";

interface StepOptions extends RunOptions {
  /** An effect through the middleware chain (it may meter). */
  meterable?: boolean;
}

/** Names the kernel records decisions under; a user's decision may not start with "$". */
const NOW = "$now";
const NO_OPTIONS: ExecuteOptions = Object.freeze({});
const PARALLEL = "$parallel";

export function makeContext(
  run: Run,
  deps: ContextDeps,
  scope = "",
  nested: readonly NestedBudget[] = [],
): FlowContext {
  const stepBound = (value: unknown, what: string) =>
    boundedJson(value, what, deps.limits.maxStepPayloadBytes);

  /** One syscall of this scope: R7 on the way in, R6 on the way out. */
  function call<T>(what: string, body: () => Promise<T>): Promise<T> {
    // Nothing starts once the run stopped or its terminal event is queued (R4, R6).
    if (ended(run)) return halted();
    try {
      run.begin(scope, what);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    if (!run.active) {
      // Every live scope of a parked run is blocked in a wait (R8), so none can call.
      run.end(scope);
      return Promise.reject(
        new InvariantViolation(`${what} was called while execution "${run.id}" is parked`),
      );
    }
    // K8.3: past the execution's deadline nothing new starts; the run cancels itself instead.
    if (run.pastDeadline()) {
      run.end(scope);
      return halted();
    }
    // A body may throw before it returns its promise (a bad argument): that is a rejection.
    let running: Promise<T>;
    try {
      running = body();
    } catch (e) {
      running = Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    // Once the run stopped or its terminal event is queued (a cancel, a deadline), the body
    // halts: it never sees an outcome the log will not have (R6).
    return running.then(
      (value) => {
        run.end(scope);
        return ended(run) ? halted<T>() : value;
      },
      (error: unknown) => {
        run.end(scope);
        return ended(run)
          ? halted<T>()
          : Promise.reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  }

  function middlewareContext<I, O>(
    effect: Effect<I, O>,
    input: I,
    options: ExecuteOptions,
    ectx: EffectContext,
    attempt: StepAttempt,
  ): MiddlewareContext {
    return makeMiddlewareContext(run, deps, nested, effect.name, options, ectx, attempt, () =>
      attempt.invoke(() => effect.run(input, ectx)),
    );
  }

  async function step<T>(
    name: string,
    input: Json | undefined,
    hasInput: boolean,
    fn: (ectx: EffectContext, attempt: StepAttempt) => Promise<T> | T,
    opts: StepOptions = {},
  ): Promise<T> {
    const claim = run.claim(scope, "step", name);
    const callId = claim.callId;
    const frame = claim.recorded ? run.state.frames[callId] : undefined;
    if (frame?.status === "completed") return own(frame.output) as T;
    if (frame && frame.status !== "started") throw errorFromData(frame.error);
    const payload: { [k: string]: Json } = { callId, scope, name };
    if (hasInput && input !== undefined) payload.input = input;
    claim.take();
    // K8.3: the timeout counts from the first attempt's logged start, on the runtime clock.
    const timeout =
      opts.timeoutMs === undefined
        ? undefined
        : stepTimeout(deps, run.id, callId, opts.timeoutMs, frame?.firstStartedAt ?? deps.now());
    const atMostOnce = opts.atMostOnce === true;
    if (frame && atMostOnce && frame.retryAtMs === undefined) {
      // K9: its last attempt started and never settled; whether it took effect is unknown.
      return settleFailed<T>(
        callId,
        new InDoubtError(
          `step "${callId}" of execution "${run.id}" is at-most-once and was interrupted after it started: whether it took effect is unknown, so it is not run again`,
        ),
        [],
      );
    }
    if (frame) {
      // Recovered between attempts: the recorded backoff still holds (retry.ts), but not past
      // the timeout; a step whose timeout passed starts no new attempt (K8.1 pre-flight).
      const due = Math.min(frame.retryAtMs ?? -Infinity, timeout?.atMs ?? Infinity);
      if (!(await retryDue(Number.isFinite(due) ? due : undefined))) return halted();
      if (timeout?.passed()) return settleFailed<T>(callId, timeout.error(), []);
      // A re-run of a step whose start was recorded counts an attempt at once.
      await startAttempt(run, payload, atMostOnce);
    } else if (atMostOnce) {
      // Durable before the effect runs, so a crash leaves it in doubt, never silently re-run.
      await startAttempt(run, merged(payload, { startedAt: deps.now() }), true);
    } else {
      run.deferStart(callId, payload); // R9
    }
    const attempt = new StepCall(
      run,
      callId,
      payload,
      opts.meterable === true,
      atMostOnce,
      timeout,
      run.trace?.step(callId, name, opts.meterable === true ? "effect" : "run"), // T3
    );
    const ectx = attempt.ectx;
    let disarm: (() => void) | undefined;
    if (timeout !== undefined) {
      const abort = () => attempt.controller?.abort(timeout.error());
      attempt.signal();
      if (timeout.passed()) abort();
      else disarm = armDeadline(timeout.clock, timeout.atMs, timeout.timeoutMs, abort);
    }
    let outcome: { output: Json | undefined } | { error: unknown };
    try {
      const meterable = opts.meterable === true;
      // Under its span when it has one (T3): spans made by the step's code are its children.
      const value = await (attempt.span
        ? attempt.span.within(() => callStep(fn, ectx, attempt, meterable))
        : callStep(fn, ectx, attempt, meterable));
      // Wrapped before it is recorded: the log, and so every replay, holds the mark.
      const marked = opts.taint === undefined ? value : taint(value, opts.taint);
      outcome = { output: stepBound(marked, `output of step "${callId}"`) };
    } catch (e) {
      outcome = { error: e };
    } finally {
      disarm?.();
      if (attempt.controller) run.release(attempt.controller);
      run.provisionals.delete(callId);
    }
    // A run that ended or stopped meanwhile ended this step's span with its drive (T4).
    if (!run.live) return halted();
    if ("error" in outcome) {
      attempt.span?.failed(outcome.error);
      return settleFailed<T>(callId, outcome.error, attempt.facts);
    }
    attempt.span?.completed();
    // The start's fields first, as when it was spread: `callId` keeps its place among them.
    const done: { [k: string]: Json } = run.takeStart(callId) ?? {};
    done.callId = callId;
    if (outcome.output !== undefined) done.output = outcome.output;
    await run.enqueue(
      attempt.facts.length === 0
        ? [{ kind: "STEP_COMPLETED", payload: done }]
        : [...attempt.facts, { kind: "STEP_COMPLETED", payload: done }],
    );
    return own(outcome.output) as T;
  }

  /** Records a step's failure (with the attempt's facts) and throws it to the body. */
  async function settleFailed<R>(callId: string, thrown: unknown, facts: EventSpec[]): Promise<R> {
    const error = errorToData(thrown);
    const failed = merged(run.takeStart(callId), { callId, error: error as unknown as Json });
    await run.enqueue([...facts, { kind: "STEP_FAILED", payload: failed }]);
    throw errorFromData(error);
  }

  /**
   * Waits until a recovered step's next attempt is due; false if the run stopped meanwhile.
   * Real time, cut short by the run stopping, like the backoff it continues.
   */
  async function retryDue(retryAtMs: number | undefined): Promise<boolean> {
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

  /** Registers (or finds) a wait and resolves with its call id once it is settled. */
  async function wait(kind: "sleep" | "suspend", wakeAtMs: number | undefined): Promise<string> {
    const claim = run.claim(scope, kind, kind);
    if (!claim.recorded) {
      const payload: { [k: string]: Json } = { callId: claim.callId, scope, name: kind };
      if (wakeAtMs !== undefined) payload.wakeAtMs = wakeAtMs;
      const done = run.enqueue([
        { kind: kind === "sleep" ? "TIMER_SCHEDULED" : "SUSPENDED", payload },
      ]);
      claim.take();
      await done;
    }
    await run.waitFor(scope, claim.callId);
    return claim.callId;
  }

  /** Records a kernel decision without waiting (its commit precedes anything that follows). */
  function record(name: string, value: Json): Json {
    const claim = run.claim(scope, "decision", name);
    if (claim.recorded) return run.state._decisions[claim.callId] ?? null;
    run.enqueueDetached([
      { kind: "DECISION_RECORDED", payload: { callId: claim.callId, scope, name, value } },
    ]);
    claim.take();
    return value;
  }

  const ctx: FlowContext = {
    executionId: run.id,

    run<T>(
      name: string,
      fn: (ectx: EffectContext) => Promise<T> | T,
      options?: RunOptions,
    ): Promise<T> {
      // Not async: `call` turns a throw into a rejection, and step's own promise is returned.
      return call(`step "${String(name)}"`, () => {
        assertName(name, "step name");
        if (typeof fn !== "function")
          throw new InvalidInputError(`step "${name}" needs a function`);
        return step(name, undefined, false, fn, checkedRunOptions(options, name));
      });
    },

    async execute<I, O>(effect: Effect<I, O>, input: I, options?: ExecuteOptions): Promise<O> {
      if (!effect || typeof effect.run !== "function") {
        throw new InvalidInputError("ctx.execute needs an effect ({ name, run }) or a step$");
      }
      assertName(effect.name, "effect name");
      effect.checkInput?.(input);
      const json = stepBound(input, `input of step "${effect.name}"`);
      // Before the call claims an id or records anything, so a replay refuses the same way.
      if (effect.refusesTainted !== undefined) refuseTainted(effect, json);
      const callOptions =
        options === undefined
          ? (effect.options ?? NO_OPTIONS)
          : {
              ...effect.options,
              ...checkedExecuteOptions(options, `ctx.execute of "${effect.name}"`),
            };
      const source = callOptions.taint ?? effect.taintsOutput;
      const runOptions: StepOptions = { ...runOptionsOf(callOptions), meterable: true };
      if (source !== undefined) {
        runOptions.taint = checkedTaintSource(source, `effect "${effect.name}" taintsOutput`);
      }
      return call(`step "${effect.name}"`, () =>
        step(
          effect.name,
          json,
          true,
          (ectx, attempt) =>
            deps.chain(middlewareContext(effect, input, callOptions, ectx, attempt)) as Promise<O>,
          runOptions,
        ),
      );
    },

    async decide<T>(name: string, fn: () => T): Promise<T> {
      assertName(name, "decision name");
      if (name.startsWith("$"))
        throw new InvalidInputError(`decision name ${JSON.stringify(name)} may not start with "$"`);
      return call(`decision "${name}"`, async () => {
        const claim = run.claim(scope, "decision", name);
        if (claim.recorded) return own(run.state._decisions[claim.callId]) as T;
        const value = fn();
        if (value instanceof Promise) {
          throw new InvalidInputError(
            `decision "${name}" returned a promise: decide takes a synchronous function (use ctx.run for async work)`,
          );
        }
        const json = stepBound(value, `value of decision "${name}"`) ?? null;
        const done = run.enqueue([
          {
            kind: "DECISION_RECORDED",
            payload: { callId: claim.callId, scope, name, value: json },
          },
        ]);
        claim.take();
        await done;
        return own(json) as T;
      });
    },

    async sleep(ms) {
      if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
        throw new InvalidInputError(
          `sleep needs a finite number of milliseconds >= 0, got ${String(ms)}`,
        );
      }
      return call("sleep", async () => void (await wait("sleep", deps.now() + ms)));
    },

    async sleepUntil(epochMs) {
      if (typeof epochMs !== "number" || !Number.isFinite(epochMs)) {
        throw new InvalidInputError(
          `sleepUntil needs a finite epoch-ms time, got ${String(epochMs)}`,
        );
      }
      return call("sleep", async () => void (await wait("sleep", epochMs)));
    },

    async suspend<T>(options: SuspendOptions<T> = {}): Promise<T> {
      const timeout = options.timeout;
      const schema =
        options.schema === undefined ? undefined : checkedSchema(options.schema, "suspend schema");
      if (
        timeout !== undefined &&
        (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout <= 0)
      ) {
        throw new InvalidInputError(
          `suspend timeout must be a finite number > 0, got ${String(timeout)}`,
        );
      }
      return call<T>("suspend", async () => {
        const callId = await wait(
          "suspend",
          timeout === undefined ? undefined : deps.now() + timeout,
        );
        const frame = run.state.frames[callId];
        if (frame?.status === "timedOut") {
          throw new SuspendTimeoutError(
            `suspend ${callId} of execution "${run.id}" timed out after ${timeout} ms`,
          );
        }
        const payload = own(frame?.output);
        return schema === undefined
          ? (payload as T)
          : validated(schema, payload, `the resume payload of suspend ${callId}`);
      });
    },

    async parallel<T>(branches: readonly ((ctx: FlowContext) => Promise<T>)[]): Promise<T[]> {
      if (!isFunctionList(branches))
        throw new InvalidInputError("ctx.parallel needs an array of functions");
      return call("parallel", async () => {
        const recorded = record(PARALLEL, branches.length);
        if (recorded !== branches.length) {
          run.stop(
            new NonDeterminismError(
              `execution "${run.id}": a ctx.parallel recorded with ${JSON.stringify(recorded)} branches now has ${branches.length}`,
            ),
          );
          return halted<T[]>();
        }
        const scopes = run.branchScopes(scope, branches.length);
        const results = Promise.all(
          branches.map(async (branch, i): Promise<T> => {
            const branchScope = scopes[i] ?? "";
            try {
              return await branch(makeContext(run, deps, branchScope));
            } finally {
              run.branchDone(branchScope);
            }
          }),
        );
        run.setBlocked(scope, true);
        try {
          return await results;
        } finally {
          run.setBlocked(scope, false);
        }
      });
    },

    async negotiateBudget(dimension, request, options) {
      if (!isDimension(dimension)) {
        throw new InvalidInputError(
          `negotiateBudget needs a dimension (tokens, costUsd, ms, memBytes, wallMs, netBytes or custom.<name>), got ${JSON.stringify(dimension)}`,
        );
      }
      const ceiling = options?.ceiling;
      for (const [what, v] of [
        ["request", request],
        ["ceiling", ceiling],
      ] as const) {
        if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
          throw new InvalidInputError(
            `negotiateBudget ${what} must be a finite number >= 0, got ${String(v)}`,
          );
        }
      }
      return call("negotiateBudget", async () => {
        const claim = run.claim(scope, "decision", NEGOTIATE);
        if (claim.recorded) {
          const value = run.state._decisions[claim.callId] as { grant?: unknown };
          return typeof value.grant === "number" ? value.grant : 0;
        }
        // Grants to children still running count as spent (children.ts O6, F10).
        const spent = spentIn(spentWithGrants(run.state), dimension);
        const grant = Math.max(0, Math.min(request, ceiling - spent));
        const value = {
          dimension,
          request,
          ceiling: ceiling,
          grant,
          limit: spent + grant,
        };
        const done = run.enqueue([
          {
            kind: "DECISION_RECORDED",
            payload: { callId: claim.callId, scope, name: NEGOTIATE, value },
          },
        ]);
        claim.take();
        await done;
        return grant;
      });
    },

    async nestedBudget<T>(
      name: string,
      budget: Budget,
      fn: (ctx: FlowContext) => Promise<T>,
    ): Promise<T> {
      assertName(name, "budget name");
      if (name === "execution") {
        throw new InvalidInputError(
          '"execution" names the execution\'s own budget; pick another name',
        );
      }
      const checked = checkedBudget(budget, `nested budget "${name}"`);
      if (typeof fn !== "function") throw new InvalidInputError("nestedBudget needs a function");
      return fn(makeContext(run, deps, scope, [...nested, { name, budget: checked }]));
    },

    ...chainSyscalls(run, deps, scope, call, own),
    ...childSyscalls(run, deps, scope, call, own),

    now() {
      // A stopped run does not record: the body halts at its next awaited call (R6).
      if (!run.active || isTerminalStatus(run.state.status)) return deps.now();
      run.begin(scope, "now");
      try {
        const t = deps.now();
        return record(NOW, t) as number;
      } finally {
        run.end(scope);
      }
    },
  };
  return ctx;
}

/** A step's code: an effect through its chain (which invokes it), or a `ctx.run` function. */
function callStep<T>(
  fn: (ectx: EffectContext, attempt: StepAttempt) => Promise<T> | T,
  ectx: EffectContext,
  attempt: StepAttempt,
  meterable: boolean,
): Promise<T> | T {
  return meterable ? fn(ectx, attempt) : attempt.invoke(() => fn(ectx, attempt));
}

/**
 * The body's own copy of a recorded value: what the fold holds (and a snapshot serialises) must
 * not change when the flow mutates what it was given.
 */
const own = copyJson;

/** The run stopped, or its terminal event is queued: the body halts (R4, R6). */
function ended(run: Run): boolean {
  return !run.live || isTerminalStatus(run.state.status);
}

/** A step's timeout (K8.1), counted from `startedAtMs` on the runtime clock. */
function stepTimeout(
  deps: ContextDeps,
  executionId: string,
  callId: string,
  timeoutMs: number,
  startedAtMs: number,
): StepTimeout {
  const clock = { now: () => deps.now() };
  const atMs = startedAtMs + timeoutMs;
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

/** `ctx.run` options, checked before anything is recorded. */
function checkedRunOptions(value: unknown, name: string): RunOptions {
  if (value === undefined) return NO_RUN_OPTIONS;
  return checkedOptions(value, `step "${name}"`, ["timeoutMs", "atMostOnce", "taint"]);
}

/**
 * Throws TaintedInputError when an effect that refuses tainted input gets some: the recorded
 * (JSON) form of the input is what is searched, so live run and replay decide alike (T5).
 */
function refuseTainted(effect: Effect<unknown, unknown>, input: Json | undefined): void {
  const owner = `effect "${effect.name}"`;
  if (!checkedRefusesTainted(effect.refusesTainted, owner)) return;
  const found = findTaint(input);
  if (found === undefined) return;
  throw new TaintedInputError(
    `${owner} refuses tainted input: ${found.path} is tainted from ${JSON.stringify(found.source)} (untaint it once it is cleared)`,
    { effect: effect.name, path: found.path, source: found.source },
  );
}

const NO_RUN_OPTIONS: RunOptions = Object.freeze({});

function runOptionsOf(options: ExecuteOptions): RunOptions {
  const out: RunOptions = {};
  if (options.timeoutMs !== undefined) out.timeoutMs = options.timeoutMs;
  if (options.atMostOnce !== undefined) out.atMostOnce = options.atMostOnce;
  return out;
}

function isFunctionList(value: unknown): boolean {
  return Array.isArray(value) && value.every((b) => typeof b === "function");
}
