/**
 * The dashboard's view of what waits, and why (issue 26 item 4): `GET /api/flow-control`
 * (api-types.ts FlowControlAnswer), and the `waiting` of the list's rows and of an execution's
 * page, each read through the runtime (runtime/verbs-flow-control.ts FV1..FV6); nothing here
 * writes.
 *
 * Invariants (tests cite FC1, FC2):
 * FC1. `GET /api/flow-control` answers `runtime.queues()` and `runtime.limiters()` as they are,
 *      with the runtime clock's nowMs.
 * FC2. A row of the list, or an execution's page, carries `waiting` exactly when
 *      `runtime.waits()` has its id; the waits are read only when some row could wait (queued,
 *      pending or running), so a list of ended executions costs no flow-control read.
 */
import type { Runtime } from "../runtime/runtime.ts";
import type { ExecutionStatus } from "../kernel/events.ts";
import type { FlowControlAnswer, WaitReason } from "./api-types.ts";

/** The statuses of an execution that may wait in a queue or on a limiter. */
const MAY_WAIT: ReadonlySet<ExecutionStatus> = new Set(["queued", "pending", "running"]);

/** FC1 */
export async function flowControlAnswer(runtime: Runtime): Promise<FlowControlAnswer> {
  const queues = await runtime.queues();
  const limiters = await runtime.limiters();
  return { queues, limiters, nowMs: runtime.clock.now() };
}

/** FC2: the rows, each with its `waiting` when it waits. */
export async function withWaits<T extends { executionId: string; status: ExecutionStatus }>(
  runtime: Runtime,
  rows: readonly T[],
): Promise<(T & { waiting?: WaitReason })[]> {
  if (!rows.some((r) => MAY_WAIT.has(r.status))) return [...rows];
  const waits = await runtime.waits();
  return rows.map((r) => {
    const waiting = waits.get(r.executionId);
    return waiting === undefined ? r : { ...r, waiting };
  });
}
