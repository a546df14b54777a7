/**
 * `runtime.restoreFromState` and `runtime.resumeAs`: an execution driven on from a replay record
 * the caller supplies (a state moved from another store, repaired by hand, or transformed for
 * new code), recorded as a STATE_RESTORED fact so replay, snapshots and recovery see what the
 * run saw. What the fold takes from it, and what it never takes, is fold/restored.ts (R1, R2).
 *
 * Invariants (tests cite R3..R6):
 * R3. Authorized against the id's owner before anything else is read; a restore onto an id with
 *     no log creates it and is refused for any successor-shaped id (ReservedSuccessorIdError,
 *     ADR 0109 fix round 3 (1)), after the authorization and without a parent read.
 * R4. Every refusal (a malformed or too large state, an unknown flow, an execution that has
 *     ended, or whose chain successor started) comes before anything is appended.
 * R5. A restore of an execution this runtime holds drops the held body once it is at rest (a
 *     running one is waited for until it parks or ends): the run is driven again from the
 *     restored record, under a fresh lease.
 * R6. resumeAs appends the restore and the resume in one batch: both or neither.
 */
import { InvalidInputError, PayloadTooLargeError } from "../kernel/errors.ts";
import { jsonBytes, toJson, type Json } from "../kernel/json.ts";
import { readRestored, type RestoredRecord } from "../fold/restored.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { Flow } from "./flow.ts";
import type { EventSpec } from "./run.ts";
import type { CallerOptions } from "./runtime-options.ts";

/** A restored state's largest JSON form: a whole replay record, so well above one payload's. */
export const MAX_RESTORED_BYTES = 16 * 1024 * 1024;

export interface RestoreOptions extends CallerOptions {
  /** The owner a restore that creates the execution records (ADR 0111); as `start`'s. */
  principal?: string;
}

export interface ResumeAsOptions extends CallerOptions {
  /**
   * Maps the execution's folded state to the one the new flow replays (its frames, call order,
   * decisions, queued resume payloads and input are taken; see fold/restored.ts). Runs before
   * anything is appended; what it throws is thrown to the caller.
   */
  transformState?: (state: ExecutionState) => unknown;
}

/** The caller's state as a restore record, or InvalidInputError naming its first problem (R4). */
export function checkedRestore(state: unknown, what: string): RestoredRecord {
  const json = toJson(state, what);
  const bytes = jsonBytes(json);
  if (bytes > MAX_RESTORED_BYTES) {
    throw new PayloadTooLargeError(
      `${what} is ${bytes} bytes of JSON; at most ${MAX_RESTORED_BYTES} may be restored`,
    );
  }
  const record = readRestored(json);
  if (typeof record === "string") throw new InvalidInputError(`${what}: ${record}`);
  return record;
}

/** The STATE_RESTORED event a restore appends, driven from then on by `flow`. */
export function restoredSpec(flow: Flow, record: RestoredRecord): EventSpec {
  const payload: { [k: string]: Json } = {
    state: record as unknown as Json,
    flow: flow.name,
    flowVersion: flow.version,
    fingerprint: flow.fingerprint,
  };
  return { kind: "STATE_RESTORED", payload, kernel: true };
}
