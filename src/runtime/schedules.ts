/**
 * Schedules on the runtime clock (ADR 0020 L27): `runtime.schedule(flow, { cron })` starts one
 * execution per cron occurrence.
 *
 * Invariant (tests cite it as SC1): an occurrence starts exactly once, even after a crash or with
 * several runtimes on one store. Each occurrence's execution id is derived from the schedule and
 * the occurrence (`<name>@<ISO time>`), and a start with a caller-chosen id is idempotent (W5),
 * so a runtime that starts an occurrence another already started, or that crashed before it
 * moved the cursor, adopts the existing execution. The cursor only saves work.
 *
 * Occurrences are measured on the runtime clock, never wall time: a simulated clock drives them.
 * Missed occurrences (every runtime was down) are started when one comes back, up to
 * MAX_CATCH_UP per pass; the next pass continues.
 */
import { Cron } from "croner";
import type { Clock } from "../kernel/clock.ts";
import { ExecutionConflictError, InvalidInputError } from "../kernel/errors.ts";
import { assertValidId } from "../kernel/ids.ts";
import type { Json } from "../kernel/json.ts";
import type { Schedule, Store } from "../store/spi.ts";
import { assertName, type Flow } from "./flow.ts";

export const MAX_CATCH_UP = 1000;

export interface ScheduleOptions {
  /** A cron expression (five or six fields, as croner reads them). */
  cron: string;
  /** The input every occurrence starts with. */
  input?: unknown;
  /** The schedule's name (default: the flow's); occurrence ids start with it. */
  name?: string;
  /** The IANA time zone the expression is read in (default "UTC"). */
  timezone?: string;
}

/** The execution id of the occurrence at `atMs`. */
export function occurrenceId(name: string, atMs: number): string {
  return `${name}@${new Date(atMs).toISOString()}`;
}

/** Parses the expression; an invalid one is InvalidInputError, raised before anything is stored. */
export function cronOf(expression: unknown, timezone: unknown, owner: string): Cron {
  if (typeof expression !== "string" || expression.trim() === "") {
    throw new InvalidInputError(`${owner} needs a cron expression`);
  }
  if (typeof timezone !== "string")
    throw new InvalidInputError(`${owner} timezone must be a string`);
  try {
    // croner reads the zone lazily; Intl refuses an unknown one at once.
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
    const cron = new Cron(expression, { paused: true, timezone });
    cron.nextRun();
    return cron;
  } catch (e) {
    throw new InvalidInputError(
      `${owner}: ${JSON.stringify(expression)} in ${timezone} is not a cron schedule (${e instanceof Error ? e.message : String(e)})`,
    );
  }
}

/** Checks a schedule's name: a name for a flow, usable at the head of an execution id. */
export function checkedScheduleName(name: unknown): string {
  assertName(name, "schedule name");
  assertValidId(occurrenceId(name, 0));
  return name;
}

export interface FireDeps {
  store: Store;
  clock: Clock;
  flow(name: string): Flow | undefined;
  start(flow: Flow, input: Json | undefined, id: string): Promise<unknown>;
  closed(): boolean;
  /** A schedule that cannot fire here (an unknown time zone on this node, say). */
  report(error: Error): void;
}

/**
 * Starts every due occurrence of the schedules whose flow this runtime has; returns the ids. A
 * schedule that fails is reported and left for the next pass; the others fire regardless.
 */
export async function fireSchedules(deps: FireDeps): Promise<string[]> {
  const started: string[] = [];
  for (const s of await deps.store.listSchedules()) {
    const flow = deps.flow(s.flow);
    if (!flow) continue;
    try {
      await fireOne(deps, s, flow, started);
    } catch (e) {
      deps.report(e instanceof Error ? e : new Error(String(e)));
    }
  }
  return started;
}

async function fireOne(deps: FireDeps, s: Schedule, flow: Flow, started: string[]): Promise<void> {
  const cron = cronOf(s.cron, s.timezone, `schedule "${s.name}"`);
  const now = deps.clock.now();
  let after = Math.max(s.fromMs, s.cursorMs);
  for (let n = 0; n < MAX_CATCH_UP && !deps.closed(); n++) {
    const next = cron.nextRun(new Date(after))?.getTime();
    if (next === undefined || next > now) break;
    const id = occurrenceId(s.name, next);
    try {
      await deps.start(flow, s.input, id);
    } catch (e) {
      // The occurrence already started, with the input the schedule had then (it was redefined
      // since): it has happened, so the cursor moves past it.
      if (!(e instanceof ExecutionConflictError)) throw e;
    }
    await deps.store.advanceSchedule(s.name, next);
    started.push(id);
    after = next;
  }
}

/**
 * The next occurrence to start, for `loom schedules`: after the cursor, so an occurrence still
 * waiting to be caught up shows (in the past), else the next one after now.
 */
export function nextOccurrence(s: Schedule, nowMs: number): number | undefined {
  const cron = cronOf(s.cron, s.timezone, `schedule "${s.name}"`);
  const pending = cron.nextRun(new Date(Math.max(s.fromMs, s.cursorMs)))?.getTime();
  if (pending !== undefined && pending <= nowMs) return pending;
  return cron.nextRun(new Date(Math.max(nowMs, s.fromMs)))?.getTime();
}
