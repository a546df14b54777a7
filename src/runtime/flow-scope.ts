/**
 * Which flow the running code belongs to, for code the flow cannot hand its context to: a
 * language model the AI SDK calls (loomwork/ai-sdk's `durableModel`), a tool the SDK executes.
 *
 * It is off until a module asks for it (`enableFlowScope`): on Node 20 an AsyncLocalStorage in
 * use puts a hook on every promise, a cost no flow that does not need it should pay.
 *
 * Invariants (tests cite FS1, FS2):
 * FS1. Once enabled, a flow body, a `ctx.parallel` branch and a `ctx.nestedBudget` body run with
 *      their own context current (`{ ctx }`), so a call made from a branch records in the branch.
 * FS2. A step's code (a `ctx.run` function, an effect) runs with `{ step }` current, naming its
 *      call: code inside a step is not the flow's, and may not record steps of its own.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { FlowContext } from "./contract.ts";

export type FlowScope = { ctx: FlowContext } | { step: string };

let storage: AsyncLocalStorage<FlowScope> | undefined;

/** Turns the scope on for this process (idempotent). */
export function enableFlowScope(): void {
  storage ??= new AsyncLocalStorage<FlowScope>();
}

/** The scope the calling code runs in: undefined outside any flow, or while it is off. */
export function currentFlowScope(): FlowScope | undefined {
  return storage?.getStore();
}

/** FS1, FS2: runs `fn` with `scope` current (just runs it while the scope is off). */
export function inFlowScope<T>(scope: FlowScope, fn: () => T): T {
  return storage === undefined ? fn() : storage.run(scope, fn);
}
