/**
 * The dashboard's schedules and fleet endpoints (api-types.ts SchedulesAnswer, FleetAnswer), each
 * a runtime call (the runtime checks and refuses; nothing here writes but through it):
 * - `GET /api/schedules` -> every stored schedule with its next occurrences and its pause.
 * - `POST /api/schedules/:id/pause`, `.../resume` (`:id` the schedule's name; a JSON body, `{}`)
 *   -> `runtime.pauseSchedule` / `resumeSchedule`: the schedule's row as it is now. Writes
 *   (routes.ts P2): a read-only server has neither.
 * - `GET /api/fleet` -> `runtime.fleet()`: the live members and the leases each holds.
 *
 * Invariants (tests cite FP1..FP3):
 * FP1. A schedule's `next` are its next NEXT_SHOWN occurrences, soonest first, computed by the
 *     runtime's own cron reading (schedules.ts nextOccurrences: croner, in the schedule's time
 *     zone); none while it is paused (SC4).
 * FP2. `lastStartedMs` is the schedule's cursor when it sits on one of its occurrences after its
 *     start: the latest occurrence started. A resume moves the cursor to the moment of the resume
 *     (SC4), which is no occurrence, so it is absent until the next one starts.
 * FP3. The dashboard acts as no principal: it pauses and resumes open schedules, and an owned one
 *     is refused (403) as the runtime refuses any caller but its owner (schedules.ts SC2).
 */
import type { Runtime } from "../runtime/runtime.ts";
import { cronOf, nextOccurrences, type OwnedSchedule } from "../runtime/schedules.ts";
import type { FleetAnswer, ScheduleRow, SchedulesAnswer } from "./api-types.ts";

/** FP1: the occurrences a row lists. */
export const NEXT_SHOWN = 5;

/** `GET /api/schedules` (FP1, FP2). */
export async function schedulesAnswer(runtime: Runtime): Promise<SchedulesAnswer> {
  const nowMs = runtime.clock.now();
  const schedules = (await runtime.schedules()).map((s) => scheduleRow(s, nowMs));
  return { schedules, nowMs };
}

/** `POST /api/schedules/:id/pause|resume` (FP3): the schedule as it is afterwards. */
export async function setSchedulePaused(
  runtime: Runtime,
  name: string,
  paused: boolean,
): Promise<ScheduleRow> {
  const s = paused ? await runtime.pauseSchedule(name) : await runtime.resumeSchedule(name);
  return scheduleRow(s, runtime.clock.now());
}

/** `GET /api/fleet`. */
export function fleetAnswer(runtime: Runtime): Promise<FleetAnswer> {
  return runtime.fleet();
}

export function scheduleRow(s: OwnedSchedule, nowMs: number): ScheduleRow {
  const row: ScheduleRow = {
    name: s.name,
    flow: s.flow,
    cron: s.cron,
    timezone: s.timezone,
    paused: s.paused,
    next: nextOccurrences(s, nowMs, NEXT_SHOWN),
  };
  if (s.input !== undefined) row.input = s.input;
  if (s.principal !== undefined) row.principal = s.principal;
  // FP2: the cursor is an occurrence started only when it sits on one.
  const cron = cronOf(s.cron, s.timezone, `schedule "${s.name}"`);
  const onOccurrence = cron.nextRun(new Date(s.cursorMs - 1))?.getTime() === s.cursorMs;
  if (s.cursorMs > s.fromMs && onOccurrence) row.lastStartedMs = s.cursorMs;
  return row;
}
