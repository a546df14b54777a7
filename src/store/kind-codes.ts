/**
 * The small integer code each event kind is stored as, in both SQL stores' event rows (SQLite
 * sqlite/row-codec.ts C2, PostgreSQL postgres/event-rows.ts E2).
 *
 * KC1. Codes are never reused or renumbered: a new kind takes the next one, appended. Rows hold
 *     them, so a code means the same kind in every release that reads it.
 */
import type { EventKind } from "../kernel/events.ts";

/**
 * KC1: the code of each kind, by position. Append only. A frozen copy of the kernel's
 * EVENT_KINDS as SQLite's migration 6 found it, not that list itself, whose order is not frozen
 * (a kind has gone in the middle of it before: STEP_NOTED).
 */
export const KIND_CODES: readonly EventKind[] = [
  "EXECUTION_STARTED",
  "STEP_STARTED",
  "STEP_COMPLETED",
  "STEP_FAILED",
  "STEP_CANCELLED",
  "STEP_NOTED",
  "DECISION_RECORDED",
  "TIMER_SCHEDULED",
  "TIMER_FIRED",
  "SUSPENDED",
  "RESUMED",
  "MESSAGE_CONSUMED",
  "RESOURCE_METERED",
  "QUOTA_EXCEEDED",
  "CHILD_STARTED",
  "CHILD_DONE",
  "EXECUTION_COMPLETED",
  "EXECUTION_FAILED",
  "EXECUTION_CANCELLED",
  "EXECUTION_CONTINUED",
  "STATE_RESTORED",
  "SUBJECT_ERASED",
  "EXECUTION_ADMITTED",
  "START_DEBOUNCED",
];

const CODE_OF = new Map<string, number>(KIND_CODES.map((k, i) => [k, i]));

/** KC1: the code of `kind`, or undefined for a kind without one. */
export function kindCode(kind: string): number | undefined {
  return CODE_OF.get(kind);
}

/** KC1: the kind a code stands for, or undefined for a code no kind has. */
export function kindOfCode(code: number): EventKind | undefined {
  return KIND_CODES[code];
}
