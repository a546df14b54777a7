/**
 * What the syscall families of the flow context share for one scope: `makeContext` (context.ts)
 * builds a Scope once per scope and hands it to each family (syscalls-*.ts, context-chain.ts,
 * children.ts), which makes its syscalls from it. The helpers more than one family uses live here
 * too, so that no family imports context.ts, which imports them all.
 *
 * Invariants the families keep through it:
 * 1. Every syscall that records goes through `call` (R4, R6, R7, K8.3; see context.ts), except
 *    `ctx.now`, which brackets itself with `run.begin`/`run.end`.
 * 2. What the body is given from the log is its own copy (`own`): the fold's value is never
 *    shared with the flow.
 */
import { copyJson, type Json } from "../kernel/json.ts";
import type { FlowContext } from "./contract.ts";
import type { ContextDeps } from "./context-deps.ts";
import type { NestedBudget } from "./budgets-in-force.ts";
import type { Run } from "./run.ts";

/** One syscall of a scope: R7 on the way in, R6 on the way out (context.ts). */
export type Call = <T>(what: string, body: () => Promise<T>) => Promise<T>;

/** The per-scope state every syscall family is made from. */
export interface Scope {
  run: Run;
  deps: ContextDeps;
  /** The scope's name: "" for the flow body, a branch's for a ctx.parallel branch. */
  scope: string;
  /** The nested budgets this scope runs under (ctx.nestedBudget), outermost first. */
  nested: readonly NestedBudget[];
  call: Call;
  /** Makes the context of another scope of the same run (a branch, a nested budget). */
  makeContext: (
    run: Run,
    deps: ContextDeps,
    scope?: string,
    nested?: readonly NestedBudget[],
  ) => FlowContext;
}

/**
 * The body's own copy of a recorded value: what the fold holds (and a snapshot serialises) must
 * not change when the flow mutates what it was given.
 */
export const own = copyJson;

/** Records a kernel decision without waiting (its commit precedes anything that follows). */
export function record(s: Scope, name: string, value: Json): Json {
  const { run, scope } = s;
  const claim = run.claim(scope, "decision", name);
  if (claim.recorded) return run.state._decisions[claim.callId] ?? null;
  run.enqueueDetached([
    { kind: "DECISION_RECORDED", payload: { callId: claim.callId, scope, name, value } },
  ]);
  claim.take();
  return value;
}
