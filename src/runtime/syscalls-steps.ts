/**
 * Steps and effects: the syscalls of the flow context that do work, `ctx.run` (a function),
 * `ctx.execute` (an effect through the middleware chain) and `ctx.decide` (a value computed once).
 * Each checks what it was given before anything is claimed or recorded, then hands the step to
 * the step machinery (syscalls-step-machinery.ts), which answers, runs and settles it.
 *
 * Invariants kept here:
 * - R7 (run.ts): every one of them goes through the scope's `call`.
 * - T5 (kernel/taint.ts): an effect that refuses tainted input is refused on the recorded form of
 *   the input, before anything is claimed, so a live run and its replay decide alike.
 * - A user's decision name may not start with "$": those are the kernel's ($now, $parallel).
 */
import { type ExecuteOptions, type MiddlewareContext } from "../effects/middleware.ts";
import type { LimiterClaim } from "../effects/effect.ts";
import { InvalidInputError, TaintedInputError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { PriceTable } from "../kernel/prices.ts";
import { checkedTaintSource, findTaint } from "../kernel/taint.ts";
import type { FlowContext, RunOptions } from "./contract.ts";
import { attemptView } from "./attempt-view.ts";
import { limiterClaimOf } from "./rate-limits.ts";
import { makeMiddlewareContext, type StepAttempt } from "./effect-call.ts";
import {
  assertName,
  checkedExecuteOptions,
  checkedOptions,
  checkedRefusesTainted,
  type Effect,
  type EffectContext,
} from "./flow.ts";
import { own, type Scope } from "./syscalls-scope.ts";
import { step, stepBound, type StepOptions } from "./syscalls-step-machinery.ts";
import { addResources, reservationProblem, type ResourceSnapshot } from "../kernel/resources.ts";

const NO_OPTIONS: ExecuteOptions = Object.freeze({});
const NO_RUN_OPTIONS: RunOptions = Object.freeze({});

export function stepSyscalls(s: Scope): Pick<FlowContext, "run" | "execute" | "decide"> {
  const { deps, call } = s;
  return {
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
        return step(s, name, undefined, false, fn, checkedRunOptions(options, name));
      });
    },

    async execute<I, O>(effect: Effect<I, O>, input: I, options?: ExecuteOptions): Promise<O> {
      if (!effect || typeof effect.run !== "function") {
        throw new InvalidInputError("ctx.execute needs an effect ({ name, run }) or a step$");
      }
      assertName(effect.name, "effect name");
      effect.checkInput?.(input);
      const json = stepBound(deps, input, `input of step "${effect.name}"`);
      // Before the call claims an id or records anything, so a replay refuses the same way.
      if (effect.refusesTainted !== undefined) refuseTainted(effect, json);
      // What the effect declares about its spend; most declare nothing and share one object.
      const callOptions =
        options === undefined
          ? (effect.options ?? NO_OPTIONS)
          : {
              ...effect.options,
              ...checkedExecuteOptions(options, `ctx.execute of "${effect.name}"`),
            };
      const declared: Declared =
        effect.reserve === undefined &&
        effect.unpriced === undefined &&
        effect.limiter === undefined &&
        callOptions.limiter === undefined
          ? NOTHING_DECLARED
          : {
              reservation:
                effect.reserve === undefined
                  ? undefined
                  : reservationOf(effect, input, deps.prices),
              unpriced: effect.unpriced?.(input, deps.prices),
              limiter: limiterClaimOf(effect, input, callOptions.limiter),
            };
      const source = callOptions.taint ?? effect.taintsOutput;
      const runOptions: StepOptions = { ...runOptionsOf(callOptions), meterable: true };
      if (declared.reservation !== undefined) runOptions.reservation = declared.reservation;
      if (source !== undefined) {
        runOptions.taint = checkedTaintSource(source, `effect "${effect.name}" taintsOutput`);
      }
      return call(`step "${effect.name}"`, () =>
        step(
          s,
          effect.name,
          json,
          true,
          (ectx, attempt) =>
            deps.chain(
              middlewareContext(s, effect, input, callOptions, ectx, attempt, declared),
            ) as Promise<O>,
          runOptions,
        ),
      );
    },

    async decide<T>(name: string, fn: () => T): Promise<T> {
      assertName(name, "decision name");
      if (name.startsWith("$"))
        throw new InvalidInputError(`decision name ${JSON.stringify(name)} may not start with "$"`);
      return call(`decision "${name}"`, () => decision(s, name, fn));
    },
  };
}

/** `ctx.decide` inside its call: the recorded value, or `fn`'s, recorded now. */
async function decision<T>(s: Scope, name: string, fn: () => T): Promise<T> {
  const { run, scope } = s;
  const claim = run.claim(scope, "decision", name);
  if (claim.recorded) return own(run.state._decisions[claim.callId]) as T;
  const value = fn();
  if (value instanceof Promise) {
    throw new InvalidInputError(
      `decision "${name}" returned a promise: decide takes a synchronous function (use ctx.run for async work)`,
    );
  }
  const json = stepBound(s.deps, value, `value of decision "${name}"`) ?? null;
  const done = run.enqueue([
    {
      kind: "DECISION_RECORDED",
      payload: { callId: claim.callId, scope, name, value: json },
    },
  ]);
  claim.take();
  await done;
  return own(json) as T;
}

/**
 * What a call declares about its spend (Effect.reserve, Effect.unpriced; issue 20) and the rate
 * limiter it reserves with (Effect.limiter, issue 26).
 */
interface Declared {
  readonly reservation: ResourceSnapshot | undefined;
  readonly unpriced: string | undefined;
  readonly limiter?: LimiterClaim | undefined;
}
const NOTHING_DECLARED: Declared = Object.freeze({ reservation: undefined, unpriced: undefined });

function middlewareContext<I, O>(
  s: Scope,
  effect: Effect<I, O>,
  input: I,
  options: ExecuteOptions,
  ectx: EffectContext,
  attempt: StepAttempt,
  declared: Declared,
): MiddlewareContext {
  return makeMiddlewareContext(
    s.run,
    s.deps,
    s.nested,
    effect.name,
    options,
    ectx,
    attempt,
    () => attempt.invoke(() => effect.run(input, attemptView(ectx))), // N2
    declared,
  );
}

/**
 * What a call of `effect` may spend at most (Effect.reserve, issue 20), checked before anything
 * is recorded: an object of amounts >= 0 (what is not one is refused).
 */
function reservationOf<I>(
  effect: Effect<I, unknown>,
  input: I,
  prices: PriceTable,
): ResourceSnapshot {
  let declared: unknown;
  try {
    declared = effect.reserve?.(input, prices);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new InvalidInputError(`effect "${effect.name}" reserve threw: ${why}`);
  }
  const problem = reservationProblem(declared); // Q6
  if (problem !== undefined) {
    throw new InvalidInputError(
      `effect "${effect.name}" reserve must return what one call may spend ({ tokens: { input, output }, costUsd, ... }): ${problem}`,
    );
  }
  return addResources({}, declared);
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

function runOptionsOf(options: ExecuteOptions): RunOptions {
  const out: RunOptions = {};
  if (options.timeoutMs !== undefined) out.timeoutMs = options.timeoutMs;
  if (options.atMostOnce !== undefined) out.atMostOnce = options.atMostOnce;
  return out;
}
