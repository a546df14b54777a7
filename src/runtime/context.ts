/**
 * The flow context: the syscalls a flow body makes. Each call gets a deterministic id (its name
 * and occurrence in its scope) and is answered from the fold when the log already has it.
 * Every call goes through `call`, which enforces R7 (one outstanding call per scope) and halts
 * the body when its run has stopped (R6).
 *
 * `makeContext` builds one scope's shared pieces (a Scope, syscalls-scope.ts) and composes the
 * syscall families made from it, one module each:
 * - steps and effects (ctx.run, ctx.execute, ctx.decide): syscalls-steps.ts
 * - waits and time (ctx.sleep, ctx.sleepUntil, ctx.suspend, ctx.now): syscalls-waits.ts
 * - parallel scopes (ctx.parallel): syscalls-parallel.ts
 * - budgets (ctx.negotiateBudget, ctx.nestedBudget): syscalls-budgets.ts
 * - the inbox and the chain (ctx.receive, ctx.continueAsNew): context-chain.ts
 * - children (ctx.spawn, ctx.awaitChild): children.ts
 */
import { InvariantViolation } from "../kernel/errors.ts";
import { isTerminalStatus } from "../kernel/events.ts";
import { halted, type Run } from "./run.ts";
import { chainSyscalls } from "./context-chain.ts";
import { childSyscalls } from "./children.ts";
import type { NestedBudget } from "./budgets-in-force.ts";
import type { FlowContext } from "./contract.ts";
import type { ContextDeps } from "./context-deps.ts";
import type { Call, Scope } from "./syscalls-scope.ts";
import { stepSyscalls } from "./syscalls-steps.ts";
import { waitSyscalls } from "./syscalls-waits.ts";
import { parallelSyscalls } from "./syscalls-parallel.ts";
import { budgetSyscalls } from "./syscalls-budgets.ts";

export type { FlowContext, RunOptions, SuspendOptions } from "./contract.ts";
export type { ContextDeps } from "./context-deps.ts";

export function makeContext(
  run: Run,
  deps: ContextDeps,
  scope = "",
  nested: readonly NestedBudget[] = [],
): FlowContext {
  const s: Scope = { run, deps, scope, nested, call: callIn(run, scope), makeContext };
  const ctx: FlowContext = {
    executionId: run.id,
    ...stepSyscalls(s),
    ...waitSyscalls(s),
    ...parallelSyscalls(s),
    ...budgetSyscalls(s),
    ...chainSyscalls(s),
    ...childSyscalls(s),
  };
  return ctx;
}

/** The `call` of one scope: every syscall of the scope goes through it. */
function callIn(run: Run, scope: string): Call {
  /** One syscall of this scope: R7 on the way in, R6 on the way out. */
  return function call<T>(what: string, body: () => Promise<T>): Promise<T> {
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
  };
}

/** The run stopped, or its terminal event is queued: the body halts (R4, R6). */
function ended(run: Run): boolean {
  return !run.live || isTerminalStatus(run.state.status);
}
