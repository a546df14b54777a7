/**
 * `GET /api/executions/:id/call?call=<callId>`: one call of an execution in full (api-types.ts
 * StepDetail), the projection `loom show --step` prints (analytics/step-detail.ts).
 *
 * Invariants (tests cite J1..J3):
 * J1. No `call` (or an empty one) is a 400; a call the execution's state has no frame of is a
 *     404, like an unknown execution.
 * J2. The log and the state are read as the execution page reads them (detail.ts D1): through
 *     the runtime, as an anonymous caller, so another principal's execution is refused.
 * J3. A log sealed with a key this runtime does not hold (CodecKeyError) is never opened: the
 *     answer says `sealed: true` and carries nothing read from the log, only what the call id
 *     says (its name and scope). With the key, the runtime opens the log and the call shows in
 *     full: whoever holds the access token is trusted with the dashboard's keys (server.ts S1).
 */
import { stepDetail, type StepDetail } from "../analytics/step-detail.ts";
import { stepHeadOf } from "../fold/steps.ts";
import { ExecutionNotFoundError, isLoomError } from "../kernel/errors.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { catchUp } from "./detail.ts";
import { HttpRefusal } from "./http.ts";

export async function callDetail(
  runtime: Runtime,
  id: string,
  params: URLSearchParams,
): Promise<StepDetail> {
  const callId = params.get("call") ?? "";
  if (callId === "") {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "name the call: ?call=<call id>");
  }
  let detail: StepDetail | undefined;
  try {
    const loaded = await runtime.getState(id);
    const events = await runtime.readLog(id);
    detail = stepDetail(events, catchUp(loaded, events), callId);
  } catch (e) {
    if (!isLoomError(e, "LOOM_CODEC_KEY")) throw e;
    if ((await runtime.store.head(id)) < 0) {
      throw new ExecutionNotFoundError(`execution "${id}" not found`, { executionId: id });
    }
    return sealedCall(callId); // J3
  }
  if (detail === undefined) {
    throw new HttpRefusal(404, "LOOM_NOT_FOUND", `execution "${id}" has no call "${callId}"`);
  }
  return detail;
}

/** J3: what a sealed call shows: its id, and the name and scope the id gives. */
export function sealedCall(callId: string): StepDetail {
  const head = stepHeadOf(callId);
  return {
    callId,
    kind: "step",
    name: head?.name ?? callId,
    scope: head?.scope ?? "",
    status: "sealed",
    attempts: [],
    metering: {},
    taint: [],
    sealed: true,
    seqs: [],
  };
}
