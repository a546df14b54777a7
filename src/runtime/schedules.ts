/**
 * Schedules on the runtime clock (ADR 0020 L27): `runtime.schedule(flow, { cron })` starts one
 * execution per cron occurrence.
 *
 * Invariants (tests cite SC1..SC3):
 * SC1. An occurrence starts exactly once, even after a crash or with several runtimes on one
 *     store. Each occurrence's execution id is derived from the schedule and the occurrence
 *     (`<name>@<ISO time>`), and a start with a caller-chosen id is idempotent (W5), so a runtime
 *     that starts an occurrence another already started, or that crashed before it moved the
 *     cursor, adopts the existing execution. The cursor only saves work.
 * SC2. A schedule is owned by the principal that first put it (ADR 0111; issue 22 item 6), or
 *     open when it was put without one. The owner is claimed once, in the key store beside the
 *     schedule (`putKey` keeps the first claim: store S19), and kept after `unschedule`, so the
 *     name stays its owner's. Putting, removing or listing an owned schedule needs its owner as
 *     the caller (UnauthorizedError otherwise, before anything is written); an open one is open to
 *     every caller, as before, but a principal cannot take it over. Its occurrences start owned by
 *     it, so only it can read, resume or cancel them.
 * SC3. An occurrence's id has a reserved shape (kernel/ids.ts I2): no caller can start it first,
 *     so the schedule never adopts a caller's input nor is stopped by another principal's
 *     execution. One that exists under another owner all the same (made before the shape was
 *     reserved) is reported and passed over: the schedule goes on.
 * SC4. A paused schedule starts no occurrence (store S23); a pause is its owner's act, as a
 *     removal is (SC2), and kept when the schedule is put again. Resuming moves the cursor to the
 *     runtime clock's now in the write that resumes, so the occurrences missed while paused are
 *     never started (as Temporal's pause): the first one started is the first after the resume.
 *
 * Occurrences are measured on the runtime clock, never wall time: a simulated clock drives them.
 * Missed occurrences (every runtime was down) are started when one comes back, up to
 * MAX_CATCH_UP per pass; the next pass continues.
 */
import { Cron } from "croner";
import type { Clock } from "../kernel/clock.ts";
import {
  ExecutionConflictError,
  InvalidInputError,
  InvariantViolation,
  UnauthorizedError,
} from "../kernel/errors.ts";
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
  /**
   * Who owns the schedule (SC2): only this principal can put it again or remove it, and its
   * occurrences start owned by it.
   */
  principal?: string;
}

/** A schedule as the runtime shows it: with its owner, when it has one (SC2). */
export type OwnedSchedule = Schedule & { principal?: string };

/** SC2: where the owner of schedule `name` is claimed, in the key store (S19). */
export function scheduleOwnerKey(name: string): string {
  return `schedule-owner:${encodeURIComponent(name)}`;
}

/** SC2: the owner a claim records; undefined for an open schedule. */
function ownerOf(material: string, name: string): string | undefined {
  let claim: unknown;
  try {
    claim = JSON.parse(material);
  } catch {
    claim = undefined;
  }
  if (claim === null || typeof claim !== "object") {
    throw new InvariantViolation(`the owner claim of schedule "${name}" is not one Loom wrote`);
  }
  const principal = (claim as { principal?: unknown }).principal;
  return typeof principal === "string" ? principal : undefined;
}

/** SC2: the owner of schedule `name` (undefined: open, or never claimed). */
export async function scheduleOwner(store: Store, name: string): Promise<string | undefined> {
  const material = await store.getKey(scheduleOwnerKey(name));
  return material === undefined ? undefined : ownerOf(material, name);
}

/**
 * SC2: claims schedule `name` for `principal` unless it is claimed already, and returns its
 * owner. A schedule put before owners were kept (`exists`, no claim) is claimed open.
 */
export async function claimSchedule(
  store: Store,
  name: string,
  principal: string | undefined,
  exists: boolean,
): Promise<string | undefined> {
  const key = scheduleOwnerKey(name);
  const known = await store.getKey(key);
  if (known !== undefined) return ownerOf(known, name);
  const claim = exists || principal === undefined ? {} : { principal };
  return ownerOf(await store.putKey(key, JSON.stringify(claim)), name);
}

/**
 * SC2: refuses `caller` on a schedule `owner` owns (an open one is everyone's). A put must name
 * its owner exactly, as a repeat start does (W5): a principal cannot take an open schedule over.
 */
export function authorizeSchedule(
  name: string,
  owner: string | undefined,
  caller: string | undefined,
  verb: "put" | "act" = "act",
): void {
  if (owner === caller || (owner === undefined && verb === "act")) return;
  throw new UnauthorizedError(
    `${caller === undefined ? "an anonymous caller" : `principal ${JSON.stringify(caller)}`} may not ${verb === "put" ? "put" : "act on"} schedule "${name}": it belongs to ${owner === undefined ? "no principal" : "another principal"}`,
  );
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
  /** Starts an occurrence, owned by `principal` (SC2), through the kernel's own path (SC3). */
  start(
    flow: Flow,
    input: Json | undefined,
    id: string,
    principal: string | undefined,
  ): Promise<unknown>;
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
    // SC4: a paused schedule starts nothing.
    if (!flow || s.paused) continue;
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
  // SC2: read once an occurrence is due, not on every pass.
  let owner: { principal: string | undefined } | undefined;
  for (let n = 0; n < MAX_CATCH_UP && !deps.closed(); n++) {
    const next = cron.nextRun(new Date(after))?.getTime();
    if (next === undefined || next > now) break;
    const id = occurrenceId(s.name, next);
    owner ??= { principal: await scheduleOwner(deps.store, s.name) };
    let ours = true;
    try {
      await deps.start(flow, s.input, id, owner.principal);
    } catch (e) {
      // The occurrence already started, with the input the schedule had then (it was redefined
      // since): it has happened, so the cursor moves past it. One another principal holds
      // (SC3) is not this schedule's: reported, passed over, never adopted.
      if (e instanceof UnauthorizedError) {
        deps.report(e);
        ours = false;
      } else if (!(e instanceof ExecutionConflictError)) throw e;
    }
    await deps.store.advanceSchedule(s.name, next);
    if (ours) started.push(id);
    after = next;
  }
}

/**
 * The next occurrence to start, for `loom schedules`: after the cursor, so an occurrence still
 * waiting to be caught up shows (in the past), else the next one after now.
 */
export function nextOccurrence(s: Schedule, nowMs: number): number | undefined {
  if (s.paused) return undefined;
  const cron = cronOf(s.cron, s.timezone, `schedule "${s.name}"`);
  const pending = cron.nextRun(new Date(Math.max(s.fromMs, s.cursorMs)))?.getTime();
  if (pending !== undefined && pending <= nowMs) return pending;
  return cron.nextRun(new Date(Math.max(nowMs, s.fromMs)))?.getTime();
}

/**
 * The next `count` occurrences to start, soonest first (the dashboard's schedules page): from the
 * one `nextOccurrence` gives, in the schedule's time zone; none while it is paused (SC4).
 */
export function nextOccurrences(s: Schedule, nowMs: number, count: number): number[] {
  const first = nextOccurrence(s, nowMs);
  if (first === undefined) return [];
  const cron = cronOf(s.cron, s.timezone, `schedule "${s.name}"`);
  const out = [first];
  while (out.length < count) {
    const next = cron.nextRun(new Date(out[out.length - 1] as number))?.getTime();
    if (next === undefined) break;
    out.push(next);
  }
  return out;
}
