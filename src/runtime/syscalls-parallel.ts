/**
 * Parallel scopes: `ctx.parallel` runs its branches concurrently, each in a scope of its own
 * with its own context (R7 holds per scope, so concurrency is only ever across scopes).
 *
 * Invariants kept here:
 * - The number of branches is a recorded decision: a re-run with another number stops the run
 *   with NonDeterminismError, as a re-run that asks for another call does (R3, run.ts).
 * - R8 (run.ts): the parent scope is blocked while its branches run, so a run whose branches all
 *   wait can park.
 */
import { inFlowScope } from "./flow-scope.ts";
import { InvalidInputError, NonDeterminismError } from "../kernel/errors.ts";
import type { FlowContext } from "./contract.ts";
import { halted } from "./run.ts";
import { record, type Scope } from "./syscalls-scope.ts";

/** The name the kernel records a parallel's branch count under. */
const PARALLEL = "$parallel";

export function parallelSyscalls(s: Scope): Pick<FlowContext, "parallel"> {
  const { run, deps, scope, call } = s;
  return {
    async parallel<T>(branches: readonly ((ctx: FlowContext) => Promise<T>)[]): Promise<T[]> {
      if (!isFunctionList(branches))
        throw new InvalidInputError("ctx.parallel needs an array of functions");
      return call("parallel", async () => {
        const recorded = record(s, PARALLEL, branches.length);
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
              // A branch runs under the nested budgets around the parallel, as its body would.
              const ctx = s.makeContext(run, deps, branchScope, s.nested);
              return await inFlowScope({ ctx }, () => branch(ctx)); // FS1
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
  };
}

function isFunctionList(value: unknown): boolean {
  return Array.isArray(value) && value.every((b) => typeof b === "function");
}
