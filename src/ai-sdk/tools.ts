/**
 * `durableTools(tools)`: AI SDK tools whose every execution is a step of the flow that runs the
 * tool loop, so a `generateText({ tools, stopWhen })` loop inside a flow resumes after a crash
 * at the step it had reached: the model calls (durableModel) and the tool calls it already made
 * are answered from the log, and only what had not run, runs.
 *
 * Invariants (tests cite AT1..AT4):
 * AT1. Each execution of a tool with `execute` is one `ctx.run` step named `tool:<name>`, in the
 *      scope of the flow code that runs the loop (a body, a branch); tools without `execute`
 *      (answered by the client, or by the provider) are passed through unchanged.
 * AT2. Its output is what the step recorded, read back (JSON), live and on a replay alike; a
 *      tool that yields (an AsyncIterable of preliminary results) is recorded by its last value.
 * AT3. The step's signal, merged with the SDK's own `abortSignal`, is the `abortSignal` the tool
 *      gets: a cancel or the step's timeout reaches it.
 * AT4. Outside a flow's body (outside any flow, inside a step's code) an execution is refused
 *      with NotInFlowError, before it runs.
 * AT5. Step options it cannot honour are refused when the tools are wrapped (InvalidInputError):
 *      `taint`, whose recorded wrapper `{ $tainted, value }` would reach the model as the tool's
 *      result.
 */
import type { ToolExecutionOptions, ToolSet } from "ai";
import { InvalidInputError, NotInFlowError } from "../kernel/errors.ts";
import type { RunOptions } from "../runtime/contract.ts";
import { currentFlowScope, enableFlowScope } from "../runtime/flow-scope.ts";

export interface DurableToolsOptions {
  /** Each tool step's options (`ctx.run`'s: a timeout, a retry policy, at most once ...). */
  step?: RunOptions;
}

type Execute = (input: unknown, options: ToolExecutionOptions<unknown>) => unknown;

/** AT1..AT4: the same tools, each execution a step. */
export function durableTools<T extends ToolSet>(tools: T, options: DurableToolsOptions = {}): T {
  if (tools === null || typeof tools !== "object" || Array.isArray(tools)) {
    throw new InvalidInputError("durableTools needs an object of tool name -> tool");
  }
  if (options.step?.taint !== undefined) {
    // AT5
    throw new InvalidInputError(
      "durableTools: step.taint is not supported yet (the model would get the taint wrapper as the tool's result)",
    );
  }
  enableFlowScope();
  const out: Record<string, unknown> = {};
  for (const [name, tool] of Object.entries(tools)) {
    const execute = (tool as { execute?: Execute }).execute;
    if (typeof execute !== "function") {
      out[name] = tool;
      continue;
    }
    out[name] = {
      ...tool,
      execute: (input: unknown, opts: ToolExecutionOptions<unknown>) =>
        executed(name, execute, input, opts, options.step),
    };
  }
  return out as T;
}

async function executed(
  name: string,
  execute: Execute,
  input: unknown,
  opts: ToolExecutionOptions<unknown>,
  step: RunOptions | undefined,
): Promise<unknown> {
  const scope = currentFlowScope();
  if (scope === undefined || !("ctx" in scope)) {
    throw new NotInFlowError(
      scope === undefined
        ? `tool "${name}" of durableTools ran outside a flow: run the tool loop in a flow's body`
        : `tool "${name}" of durableTools ran inside step "${scope.step}": a step's code cannot record steps`,
    );
  }
  return scope.ctx.run(
    `tool:${name}`,
    async (ectx) => {
      const given = opts.abortSignal;
      const abortSignal = given === undefined ? ectx.signal : AbortSignal.any([ectx.signal, given]);
      return lastOf(await execute(input, { ...opts, abortSignal })); // AT2, AT3
    },
    step,
  );
}

/** AT2: an AsyncIterable's last value, or the value itself. */
async function lastOf(value: unknown): Promise<unknown> {
  if (value === null || typeof value !== "object" || !(Symbol.asyncIterator in value)) {
    return value;
  }
  let last: unknown;
  for await (const v of value as AsyncIterable<unknown>) last = v;
  return last;
}
