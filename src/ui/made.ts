/**
 * The dashboard's writes that make a new execution, and what it can make them of:
 * - `POST /api/executions/:id/fork` ForkRequest -> `runtime.fork`: MadeExecution.
 * - `POST /api/executions/:id/rerun` RerunRequest -> `runtime.start` of the same flow: MadeExecution.
 * - `GET /api/flows` -> FlowsAnswer: the flows the dashboard's runtime has (`loom ui --module M`).
 *
 * Invariants (tests cite M1..M4):
 * M1. A body that is not a JSON object, a field of the wrong type or a field it does not take is
 *     a 400 before the runtime is called; the runtime's own refusals (a fork point past the end, a
 *     budget it would raise, an input the flow's schema refuses, an id taken) are answered with
 *     their codes, and none of them appends (runtime.ts W4, fork.ts V4, V6).
 * M2. A rerun starts the same flow with the execution's recorded input (or the one given), its
 *     recorded budget and deadline, and its data subject, so a rerun of a subject's execution is
 *     sealed with the subject's key like the original.
 * M3. A rerun needs the flow registered in the dashboard's runtime (a 409 LOOM_UNKNOWN_FLOW saying
 *     how to start it with the module); it is driven here only when this runtime runs a background
 *     loop, else only recorded, for the processes that drive the flow (`loom worker`) to claim.
 * M4. The answer is the new execution's state as the store has it: its start, deadline (counted
 *     from its start), budget and what it spent (a fork starts from what its prefix spent).
 */
import type { ExecutionState } from "../fold/state.ts";
import { isPlainObject, type Json } from "../kernel/json.ts";
import type { Runtime } from "../runtime/runtime.ts";
import type { FlowsAnswer, MadeExecution } from "./api-types.ts";
import { HttpRefusal } from "./http.ts";

type Fields = { [key: string]: Json };

/** M1: the body as an object of only the fields `allowed`. */
function fieldsOf(body: unknown, what: string, allowed: readonly string[]): Fields {
  if (!isPlainObject(body)) {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", `the body of ${what} must be a JSON object`);
  }
  const extra = Object.keys(body).filter((k) => !allowed.includes(k));
  if (extra.length > 0) {
    throw new HttpRefusal(
      400,
      "LOOM_INVALID_INPUT",
      `${what} takes ${allowed.join(", ")}; not ${extra.map((k) => JSON.stringify(k)).join(", ")}`,
    );
  }
  return body;
}

function optionalId(fields: Fields, what: string): string | undefined {
  const v = fields.newId;
  if (v === undefined) return undefined;
  if (typeof v !== "string" || v === "") {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", `${what}: newId must be a non-empty string`);
  }
  return v;
}

export async function forkExecution(
  runtime: Runtime,
  id: string,
  body: unknown,
): Promise<MadeExecution> {
  const f = fieldsOf(body, "fork", ["atSequence", "newId", "budget", "keepDeadline"]);
  const at = f.atSequence;
  if (typeof at !== "number" || !Number.isSafeInteger(at) || at < 0) {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "fork: atSequence must be an integer >= 0");
  }
  if (f.budget !== undefined && !isPlainObject(f.budget)) {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "fork: budget must be an object of limits");
  }
  if (f.keepDeadline !== undefined && typeof f.keepDeadline !== "boolean") {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "fork: keepDeadline must be true or false");
  }
  const newId = optionalId(f, "fork");
  const handle = await runtime.fork(id, at, newId, {
    ...(f.budget === undefined ? {} : { budget: f.budget }),
    ...(f.keepDeadline === undefined ? {} : { keepDeadline: f.keepDeadline }),
  });
  return madeOf(await runtime.getState(handle.id));
}

export async function rerunExecution(
  runtime: Runtime,
  id: string,
  body: unknown,
): Promise<MadeExecution> {
  const f = fieldsOf(body, "rerun", ["input", "newId"]);
  const newId = optionalId(f, "rerun");
  const events = await runtime.readLog(id);
  const state = await runtime.getState(id);
  const { flows, background } = runtime.registered;
  if (!flows.has(state.flow)) {
    throw new HttpRefusal(
      409,
      "LOOM_UNKNOWN_FLOW",
      `this dashboard's runtime does not have flow ${JSON.stringify(state.flow)}: start it with the module that defines the flow, \`loom ui --module <file>\`, to rerun it`,
    );
  }
  const start = events[0]?.seq === 0 && isPlainObject(events[0].payload) ? events[0].payload : {};
  const handle = await runtime.start(
    state.flow,
    Object.hasOwn(f, "input") ? f.input : state.input,
    {
      ...(newId === undefined ? {} : { id: newId }),
      ...(isPlainObject(start.budget) ? { budget: start.budget } : {}),
      ...(typeof start.deadlineMs === "number" ? { deadlineMs: start.deadlineMs } : {}),
      ...(state._subject === undefined ? {} : { subject: state._subject }),
      drive: background,
    },
  );
  return madeOf(await runtime.getState(handle.id));
}

/** M4 */
function madeOf(state: ExecutionState): MadeExecution {
  const made: MadeExecution = {
    executionId: state.executionId,
    startedAtMs: state.startedAt,
    spent: state._resources ?? {},
  };
  if (state.deadlineMs !== undefined) made.deadlineMs = state.deadlineMs;
  if (state._budget !== undefined) made.budget = state._budget;
  return made;
}

export function flowsAnswer(runtime: Runtime): FlowsAnswer {
  return {
    flows: [...runtime.registered.flows.values()].map((f) => ({
      name: f.name,
      version: f.version,
      hasInputSchema: f.input !== undefined,
    })),
  };
}
