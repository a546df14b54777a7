/**
 * Starting an execution (runtime.ts `start`, a schedule's occurrence): every refusal before any
 * append (W4), a caller-chosen id as an idempotent start (W5), and a start that waits in a queue
 * (queues.ts QU1) or is debounced (debounce.ts DB1..DB3).
 */
import {
  ExecutionConflictError,
  InvalidInputError,
  UnauthorizedError,
  UnknownFlowError,
} from "../kernel/errors.ts";
import { boundedJson, type Json } from "../kernel/json.ts";
import { assertValidId } from "../kernel/ids.ts";
import { checkedDuration } from "../kernel/limits.ts";
import { queueMarkJson, type QueueMark } from "../kernel/queue.ts";
import { validated } from "../kernel/schema.ts";
import type { ExecutionState } from "../fold/state.ts";
import { checkedBudget, isFlow, type Flow } from "./flow.ts";
import {
  assertCreatable,
  assertSameStart,
  checkedPrincipal,
  checkedSubject,
  startPayload,
} from "./runtime-support.ts";
import type { ExecutionHandle, StartOptions } from "./runtime-options.ts";
import { create } from "./runtime-core.ts";
import type { RuntimeState } from "./runtime-state.ts";
import { queueMarkOf } from "./queue-options.ts";
import { debouncedStart } from "./debounce.ts";
import { handle, registerFlow } from "./verbs-executions.ts";

/** Starts `flow` with `input` (runtime.ts `start`: W4, W5); a caller's id of no reserved shape. */
export function start(
  s: RuntimeState,
  flow: string | Flow,
  input?: unknown,
  options: StartOptions = {},
): Promise<ExecutionHandle> {
  return startChecked(s, flow, input, options, undefined);
}

/**
 * The schedule's own start of its occurrence `id` (schedules.ts SC1, kernel/ids.ts I2): the one
 * path that may create an id of the occurrence shape. Not reachable from `Runtime.start`, whose
 * options cannot name it.
 */
export function startOccurrence(
  s: RuntimeState,
  flow: Flow,
  input: unknown,
  options: { id: string; principal?: string },
): Promise<ExecutionHandle> {
  return startChecked(s, flow, input, options, "occurrence");
}

async function startChecked(
  s: RuntimeState,
  flow: string | Flow,
  input: unknown,
  options: StartOptions,
  kernelMade: "occurrence" | undefined,
): Promise<ExecutionHandle> {
  s.assertOpen();
  if (isFlow(flow)) registerFlow(s, flow);
  else if (typeof flow !== "string") {
    throw new InvalidInputError(
      "start needs a flow made with flow$, or the name of a registered one",
    );
  }
  const name = isFlow(flow) ? flow.name : flow;
  const registered = s.flows.get(name);
  if (!registered) {
    const known = [...s.flows.keys()].map((n) => `"${n}"`).join(", ") || "none";
    throw new UnknownFlowError(
      `no flow named ${JSON.stringify(name)} is registered (registered: ${known})`,
    );
  }
  const id = options.id ?? s.ids.newId();
  assertValidId(id);
  assertCreatable(id, kernelMade);
  const checked =
    registered.input === undefined
      ? input
      : await validated(registered.input, input, `the input of flow "${name}"`);
  const json = boundedJson(checked, `input of flow "${name}"`, s.limits.maxInputBytes);
  const budget =
    options.budget === undefined
      ? registered.budget
      : checkedBudget(options.budget, `execution "${id}"`);
  const deadlineMs =
    options.deadlineMs === undefined
      ? registered.deadlineMs
      : checkedDuration(options.deadlineMs, `execution "${id}" deadlineMs`);
  const principal = checkedPrincipal(options.principal);
  const subject = checkedSubject(options.subject);
  const payload = startPayload(registered, json, { budget, deadlineMs });
  if (principal !== undefined) payload.principal = principal;
  if (subject !== undefined) payload.subject = subject;
  if (options.drive !== undefined && typeof options.drive !== "boolean") {
    throw new InvalidInputError("start option drive must be true or false");
  }
  // QU1: a queued start is recorded, not driven; the admission duty gives it a slot.
  const queue = queueMarkOf(registered, options, checked);
  if (queue) payload.queue = queueMarkJson(queue);
  const repeat = (known: ExecutionState) =>
    assertRepeatStart(known, id, registered.name, json, principal, subject);
  if (options.debounce !== undefined) {
    if (!queue || options.id !== undefined || options.dedupe !== undefined) {
      throw new InvalidInputError(
        "start option debounce needs a queue (the start's or the flow's), and no id or dedupe of its own",
      );
    }
    const made = (mark: QueueMark) => ({ ...payload, queue: queueMarkJson(mark) });
    const at = await debouncedStart(s, registered, id, queue, made, options.debounce, json, {
      principal,
      subject,
    });
    return handle(s, at, principal === undefined ? {} : { as: principal });
  }
  await s.tasks.exclusive(id, () =>
    create(s, registered, id, payload, repeat, [], options.drive !== false && !queue),
  );
  if (queue) s.nudge();
  return handle(s, id, principal === undefined ? {} : { as: principal });
}

/** W5: a start that finds `known` under its id is the same start, by the same owner. */
function assertRepeatStart(
  known: ExecutionState,
  id: string,
  flow: string,
  json: Json | undefined,
  principal: string | undefined,
  subject: string | undefined,
): void {
  // The owner first: another principal learns nothing of the flow or its input.
  if (known._principal !== principal) {
    throw new UnauthorizedError(
      `execution "${id}" already exists and belongs to another principal`,
      { executionId: id },
    );
  }
  // A repeat start may not change whose data the execution holds (docs/trust.md).
  if (known._subject !== subject) {
    throw new ExecutionConflictError(
      `execution "${id}" already exists with ${known._subject === undefined ? "no data subject" : "another data subject"}`,
      { executionId: id },
    );
  }
  assertSameStart(id, flow, json, known.flow, known.input);
}
