/**
 * The flow context: the syscalls a flow body makes. Each call gets a deterministic id (its name
 * and occurrence in its scope) and is answered from the fold when the log already has it.
 * Every call goes through `call`, which enforces R7 (one outstanding call per scope) and halts
 * the body when its run has stopped (R6).
 */
import { abortableDelay, raceAbort, reasonOf } from "../effects/delay.ts";
import {
  ExecutionEndedError,
  InDoubtError,
  InvalidInputError,
  InvariantViolation,
  NonDeterminismError,
  StepTimeoutError,
  SuspendTimeoutError,
  errorFromData,
  errorToData,
} from "../kernel/errors.ts";
import { isTerminalStatus } from "../kernel/events.ts";
import { boundedJson, type Json } from "../kernel/json.ts";
import type { Limits } from "../kernel/limits.ts";
import {
  assertName,
  checkedBudget,
  checkedExecuteOptions,
  checkedOptions,
  type Effect,
  type EffectContext,
} from "./flow.ts";
import { halted, type EventSpec, type Run } from "./run.ts";
import { chainSyscalls } from "./context-chain.ts";
import { armDeadline, remainingMs } from "./deadline.ts";
import { makeMiddlewareContext, type NestedBudget, type StepAttempt } from "./effect-call.ts";
import { isDimension, spentIn, type Budget, type ResourceSnapshot } from "../kernel/resources.ts";
import { NEGOTIATE } from "../fold/fold.ts";
import type { InboxMessage } from "../store/spi.ts";
import { type ReceiveOptions } from "./inbox.ts";
import { addDelta, type ExecuteOptions, type MiddlewareContext } from "../effects/middleware.ts";

export interface SuspendOptions {
  /** Milliseconds to wait for a resume before the suspend throws SuspendTimeoutError. */
  timeout?: number;
}

/** Options of a `ctx.run` step. */
export interface RunOptions {
  /**
   * The step fails with StepTimeoutError this long after its first attempt's logged start, on
   * the runtime clock, also across crashes; its signal aborts then. A finite number > 0.
   */
  timeoutMs?: number;
  /**
   * At most once: the step's start is durable before its code runs, and a crash after that is
   * not followed by a re-run: the flow gets InDoubtError instead. Default: at least once.
   */
  atMostOnce?: boolean;
}

/** What `step` needs to know of a call beyond its name and input. */
interface StepOptions extends RunOptions {
  /** An effect through the middleware chain (it may meter). */
  meterable?: boolean;
}

export interface FlowContext {
  readonly executionId: string;
  /** Runs `fn` once as a durable step; a re-run returns its recorded result. */
  run<T>(
    name: string,
    fn: (ectx: EffectContext) => Promise<T> | T,
    options?: RunOptions,
  ): Promise<T>;
  /**
   * Runs an effect (or a `step$`) with a recorded input through the middleware chain; `options`
   * (a retry policy, say) override the effect's own for this call.
   */
  execute<I, O>(effect: Effect<I, O>, input: I, options?: ExecuteOptions): Promise<O>;
  /** Records the value of a synchronous, non-deterministic choice; a re-run gets the same value. */
  decide<T>(name: string, fn: () => T): Promise<T>;
  /** A durable timer: survives restarts; waits above 2^31-1 ms are armed in chunks. */
  sleep(ms: number): Promise<void>;
  /** Sleeps until an epoch-ms time on the runtime clock. */
  sleepUntil(epochMs: number): Promise<void>;
  /** Parks until `runtime.resume(id, payload)` and returns the payload. */
  suspend<T = Json>(options?: SuspendOptions): Promise<T>;
  /** Runs branches concurrently; each is a scope of its own, so its call ids are stable. */
  parallel<T>(branches: readonly ((ctx: FlowContext) => Promise<T>)[]): Promise<T[]>;
  /** The runtime clock's time, recorded so a re-run sees the same value. */
  now(): number;
  /**
   * Asks for more of one budget dimension (ADR 0032 R2): grant = min(request, ceiling - spent),
   * recorded as a decision, so a re-run gets the same grant; the budget's limit in that
   * dimension becomes spent + grant, and spending past it is QUOTA_EXCEEDED as usual.
   */
  negotiateBudget(
    dimension: string,
    request: number,
    options: { ceiling: number },
  ): Promise<number>;
  /**
   * Runs `fn` under a named budget besides the execution's: its effects' spend counts toward
   * both, and its effects are refused once it is spent while the rest of the flow goes on.
   * Budgets of the same name share their spend.
   */
  nestedBudget<T>(name: string, budget: Budget, fn: (ctx: FlowContext) => Promise<T>): Promise<T>;
  /**
   * Takes the next message of the chain's inbox (`runtime.send`), in order, each once; parks
   * until one comes. With `timeout`, throws SuspendTimeoutError when none came in time.
   */
  receive<T = Json>(options?: ReceiveOptions): Promise<T>;
  /**
   * Ends this generation and continues the chain as a new one (ADR 0109): the successor
   * `<chainId>~<n+1>` starts this flow (the code registered now) with `carry` as its input, and
   * inherits what was spent, the inbox cursors and the chain deadline. Never returns. Needs
   * `features.continueAsNew`; refused (before anything is recorded) from a ctx.parallel branch,
   * with a wait outstanding, or with a carry over `maxCarryBytes`.
   */
  continueAsNew(carry?: unknown): Promise<never>;
}

export interface ContextDeps {
  limits: Limits;
  now(): number;
  /** A topic's messages in a chain's inbox past `afterSeq` (one batch). */
  readInbox(chainId: string, topic: string, afterSeq: number): Promise<InboxMessage[]>;
  /** The largest carry `continueAsNew` takes (bytes of JSON text). */
  maxCarryBytes: number;
  /** Rotates the run to its successor (undefined while `features.continueAsNew` is off). */
  rotate: ((run: Run, carry: Json | undefined) => void) | undefined;
  /** The effect middleware chain, composed (see effects/middleware.ts). */
  chain: (ctx: MiddlewareContext) => Promise<unknown>;
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
    if (!run.live || isTerminalStatus(run.state.status)) return halted();
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
    // Once the run stopped or its terminal event is queued (a cancel, a deadline), the body
    // halts: it never sees an outcome the log will not have (R6).
    const ended = () => !run.live || isTerminalStatus(run.state.status);
    return body().then(
      (value) => {
        run.end(scope);
        return ended() ? halted<T>() : value;
      },
      (error: unknown) => {
        run.end(scope);
        return ended()
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
    const invoke = () => attempt.invoke(() => effect.run(input, ectx));
    return makeMiddlewareContext(run, deps, nested, effect.name, options, ectx, attempt, invoke);
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
    const timeoutMs = opts.timeoutMs;
    const clock = { now: () => deps.now() };
    const timeoutAt =
      timeoutMs === undefined ? undefined : (frame?.firstStartedAt ?? deps.now()) + timeoutMs;
    const timeoutError = () =>
      new StepTimeoutError(
        `step "${callId}" of execution "${run.id}" ran past its timeoutMs of ${timeoutMs} ms`,
      );
    const timedOut = () =>
      timeoutAt !== undefined && remainingMs(clock, timeoutAt, timeoutMs ?? 0) <= 0;
    if (frame && opts.atMostOnce && frame.retryAtMs === undefined) {
      // K9: its last attempt started and never settled; whether it took effect is unknown.
      return settleFailed<T>(
        new InDoubtError(
          `step "${callId}" of execution "${run.id}" is at-most-once and was interrupted after it started: whether it took effect is unknown, so it is not run again`,
        ),
        [],
      );
    }
    if (frame) {
      // Recovered between attempts: the recorded backoff still holds (retry.ts), but not past
      // the timeout; a step whose timeout passed starts no new attempt (K8.1 pre-flight).
      const due = Math.min(frame.retryAtMs ?? -Infinity, timeoutAt ?? Infinity);
      if (!(await retryDue(Number.isFinite(due) ? due : undefined))) return halted();
      if (timedOut()) return settleFailed<T>(timeoutError(), []);
      // A re-run of a step whose start was recorded counts an attempt at once.
      await startAttempt(payload, opts.atMostOnce === true);
    } else if (opts.atMostOnce) {
      // Durable before the effect runs, so a crash leaves it in doubt, never silently re-run.
      await startAttempt({ ...payload, startedAt: deps.now() }, true);
    } else {
      run.deferStart(callId, payload); // R9
    }
    let controller: AbortController | undefined;
    const signal = () => (controller ??= run.controller()).signal;
    const ectx: EffectContext = {
      executionId: run.id,
      stepId: callId,
      attempt: run.state.frames[callId]?.attempts ?? 1,
      idempotencyKey: `${run.id}/${callId}`,
      // Made on first use: most steps never read it, and an AbortController is not free.
      get signal() {
        return signal();
      },
      // A copy, made on first use.
      get resources() {
        resources ??= own(run.state._resources ?? {});
        return resources;
      },
      meter(delta) {
        if (!opts.meterable) {
          throw new InvalidInputError(
            "meter() reports an effect's cost to its metering: run the effect with ctx.execute (ctx.run steps are not metered)",
          );
        }
        attempt.reported = addDelta(attempt.reported, delta);
      },
      provisional(soFar) {
        if (opts.meterable) run.provisionals.set(callId, soFar);
      },
    };
    let resources: ResourceSnapshot | undefined;
    let disarm: (() => void) | undefined;
    if (timeoutAt !== undefined && timeoutMs !== undefined) {
      const abort = () => controller?.abort(timeoutError());
      signal();
      if (timedOut()) abort();
      else disarm = armDeadline(clock, timeoutAt, timeoutMs, abort);
    }
    const attempt: StepAttempt = {
      reported: {},
      facts: [],
      // K8.1: code whose signal already aborted is not started; with a timeout, the code is raced
      // against the signal, so an attempt that ignores it still ends on time.
      invoke<R>(work: () => R | Promise<R>): Promise<R> {
        if (controller?.signal.aborted) return Promise.reject(reasonOf(controller.signal));
        const running = Promise.resolve().then(work);
        if (timeoutMs === undefined) return running;
        return raceAbort(running, signal()).catch((e: unknown) => {
          // Cut short by its timeout before it could meter: what it reported so far counts.
          const soFar = signal().aborted ? run.provisional(callId) : undefined;
          if (soFar) attempt.reported = addDelta(attempt.reported, { ...soFar, estimated: true });
          throw e;
        });
      },
      // A failed attempt is a fact before the backoff starts (retry.ts); the step stays open.
      async failed(error, retryInMs) {
        const facts = attempt.facts;
        attempt.facts = [];
        const failed: { [k: string]: Json } = {
          ...run.takeStart(callId),
          callId,
          error: errorToData(error) as unknown as Json,
          attempt: ectx.attempt,
          retryInMs,
          retrying: true,
        };
        await run.enqueue([...facts, { kind: "STEP_FAILED", payload: failed }]);
      },
      async next() {
        if (!run.live || isTerminalStatus(run.state.status)) {
          throw new ExecutionEndedError(
            `execution "${run.id}" ended during the backoff of step "${callId}": no further attempt`,
          );
        }
        ectx.attempt++;
        resources = undefined;
        await startAttempt(payload, opts.atMostOnce === true);
      },
    };
    let outcome: { output: Json | undefined } | { error: unknown };
    try {
      const value = await (opts.meterable
        ? fn(ectx, attempt)
        : attempt.invoke(() => fn(ectx, attempt)));
      outcome = { output: stepBound(value, `output of step "${callId}"`) };
    } catch (e) {
      outcome = { error: e };
    } finally {
      disarm?.();
      if (controller) run.release(controller);
      run.provisionals.delete(callId);
    }
    if (!run.live) return halted();
    if ("error" in outcome) return settleFailed<T>(outcome.error, attempt.facts);
    const done: { [k: string]: Json } = { ...run.takeStart(callId), callId };
    if (outcome.output !== undefined) done.output = outcome.output;
    await run.enqueue([...attempt.facts, { kind: "STEP_COMPLETED", payload: done }]);
    return own(outcome.output) as T;

    /** Records the step's failure (with the attempt's facts) and throws it to the body. */
    async function settleFailed<R>(thrown: unknown, facts: EventSpec[]): Promise<R> {
      const error = errorToData(thrown);
      const failed: { [k: string]: Json } = {
        ...run.takeStart(callId),
        callId,
        error: error as unknown as Json,
      };
      await run.enqueue([...facts, { kind: "STEP_FAILED", payload: failed }]);
      throw errorFromData(error);
    }
  }

  /** Counts an attempt: at once for an at-most-once step (durable first), else with the next commit. */
  async function startAttempt(payload: { [k: string]: Json }, durable: boolean): Promise<void> {
    if (durable) await run.enqueue([{ kind: "STEP_STARTED", payload }]);
    else run.enqueueDetached([{ kind: "STEP_STARTED", payload }]);
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

    run(name, fn, options) {
      return call(`step "${String(name)}"`, async () => {
        assertName(name, "step name");
        if (typeof fn !== "function")
          throw new InvalidInputError(`step "${name}" needs a function`);
        return step(name, undefined, false, fn, checkedRunOptions(options, `step "${name}"`));
      });
    },

    async execute<I, O>(effect: Effect<I, O>, input: I, options?: ExecuteOptions): Promise<O> {
      if (!effect || typeof effect.run !== "function") {
        throw new InvalidInputError("ctx.execute needs an effect ({ name, run }) or a step$");
      }
      assertName(effect.name, "effect name");
      effect.checkInput?.(input);
      const json = stepBound(input, `input of step "${effect.name}"`);
      const callOptions =
        options === undefined
          ? (effect.options ?? NO_OPTIONS)
          : {
              ...effect.options,
              ...checkedExecuteOptions(options, `ctx.execute of "${effect.name}"`),
            };
      return call(`step "${effect.name}"`, () =>
        step(
          effect.name,
          json,
          true,
          (ectx, attempt) =>
            deps.chain(middlewareContext(effect, input, callOptions, ectx, attempt)) as Promise<O>,
          { ...runOptionsOf(callOptions), meterable: true },
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

    async suspend<T>(options: SuspendOptions = {}): Promise<T> {
      const timeout = options.timeout;
      if (
        timeout !== undefined &&
        (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout <= 0)
      ) {
        throw new InvalidInputError(
          `suspend timeout must be a finite number > 0, got ${String(timeout)}`,
        );
      }
      return call("suspend", async () => {
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
        return own(frame?.output) as T;
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
        const spent = spentIn(run.state._resources, dimension);
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

/**
 * The body's own copy of a recorded value: what the fold holds (and a snapshot serialises) must
 * not change when the flow mutates what it was given.
 */
function own<T>(value: T): T {
  return value !== null && typeof value === "object" ? structuredClone(value) : value;
}

/** `ctx.run` options, checked before anything is recorded. */
function checkedRunOptions(value: unknown, owner: string): RunOptions {
  return value === undefined ? {} : checkedOptions(value, owner, ["timeoutMs", "atMostOnce"]);
}

function runOptionsOf(options: ExecuteOptions): RunOptions {
  const out: RunOptions = {};
  if (options.timeoutMs !== undefined) out.timeoutMs = options.timeoutMs;
  if (options.atMostOnce !== undefined) out.atMostOnce = options.atMostOnce;
  return out;
}

function isFunctionList(value: unknown): boolean {
  return Array.isArray(value) && value.every((b) => typeof b === "function");
}
