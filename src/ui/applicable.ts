/**
 * Which of an execution page's actions apply now (api-types.ts ApplicableActions), so the page
 * shows only those: the runtime still checks and refuses each one when it is sent.
 *
 * Invariants (tests cite Y1..Y3):
 * Y1. A read-only server (server.ts S5) applies none.
 * Y2. cancel while the execution has not ended; resume only while it is parked at an open
 *     suspend (a suspend waits and no step is in flight: inside a step, a resume would only be
 *     queued); send while its chain has not ended (a continued execution's head still runs);
 *     fork while its log holds a prefix a fork can copy (from sequence 0, dense); rerun while
 *     the dashboard's runtime has its flow registered (`loom ui --module M`).
 * Y3. A continued execution's chain is read through routing (`followToHead`), as a send is
 *     routed: a head that cannot be read (retention, another principal's) is taken as ended.
 */
import { isTerminalStatus, type Envelope } from "../kernel/events.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { Runtime } from "../runtime/runtime.ts";
import type { ApplicableActions } from "./api-types.ts";

const NONE: ApplicableActions = {
  cancel: false,
  resume: false,
  send: false,
  fork: false,
  rerun: false,
};

export async function applicableActions(
  runtime: Runtime,
  state: ExecutionState,
  events: readonly Envelope[],
  readOnly: boolean,
): Promise<ApplicableActions> {
  if (readOnly) return { ...NONE }; // Y1
  const ended = isTerminalStatus(state.status);
  return {
    cancel: !ended,
    resume: !ended && state._openSuspends.length > 0 && state.inFlight === 0,
    send: !ended || (state.status === "continued" && (await headRuns(runtime, state))),
    fork: events[0]?.seq === 0,
    rerun: runtime.registered.flows.has(state.flow),
  };
}

/** Y3 */
async function headRuns(runtime: Runtime, state: ExecutionState): Promise<boolean> {
  try {
    const head = await runtime.followToHead(state.executionId);
    return !isTerminalStatus((await runtime.getState(head)).status);
  } catch {
    return false;
  }
}
