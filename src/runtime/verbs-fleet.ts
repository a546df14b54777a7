/**
 * What the runtime does as one worker among the processes sharing its store: its background
 * duties (due timers and supervisor wakes, schedules, recovery of abandoned executions, by claims
 * in a fleet: fleet.ts L1..L4) and the schedules it keeps. Each takes the runtime's state
 * (runtime-state.ts); the background loop and the timer service call these through the wiring
 * runtime.ts hands the state (W8), and runtime.ts's Runtime exposes the public ones.
 *
 * Invariants (runtime.ts states them): W3 (a fired timer, a recovery, a claimed execution runs
 * exclusive on its id), W6 (recoverAbandoned re-drives every execution whose owner is gone: the
 * only repair), fleet L1 (in a fleet, recovery claims, and no more than it has room for).
 */
import { isTerminalStatus } from "../kernel/events.ts";
import {
  ExecutionNotFoundError,
  InvalidInputError,
  InvariantViolation,
  ensureError,
  isLoomError,
  RuntimeClosedError,
  UnknownFlowError,
} from "../kernel/errors.ts";
import { boundedJson } from "../kernel/json.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { Lease, Schedule } from "../store/spi.ts";
import { CLAIM_BATCH, MAX_CLAIM_SKIP, type FleetMember } from "./fleet.ts";
import { isFlow, type Flow } from "./flow.ts";
import { loadState } from "./load-state.ts";
import type { EventSpec } from "./run.ts";
import {
  authorizeSchedule,
  checkedScheduleName,
  claimSchedule,
  cronOf,
  fireSchedules as fireStoredSchedules,
  scheduleOwner,
  type OwnedSchedule,
  type ScheduleOptions,
} from "./schedules.ts";
import { checkedPrincipal } from "./runtime-support.ts";
import type { CallerOptions } from "./runtime-options.ts";
import { isWake, onWake, WATCH_EVERY_MS } from "./supervisor.ts";
import { deliver, drive, ownedRun, recoverOne } from "./runtime-core.ts";
import { supervisorDeps } from "./runtime-wiring.ts";
import { registerFlow } from "./verbs-executions.ts";
import { startOccurrence } from "./verbs-start.ts";
import type { RuntimeState } from "./runtime-state.ts";

// ---- timers and wakes ------------------------------------------------------------------------

/** A timer of `id` came due here (armed locally, or read from the store's due rows). */
export async function fireTimer(s: RuntimeState, id: string, callId: string): Promise<void> {
  if (s.closed) return;
  if (isWake(callId)) return fireWake(s, id, callId);
  const make = (state: ExecutionState): EventSpec | undefined => {
    const f = Object.hasOwn(state.frames, callId) ? state.frames[callId] : undefined;
    if (isTerminalStatus(state.status) || f?.status !== "waiting" || f.wakeAtMs === undefined) {
      s.tasks.background(s.store.deleteTimer(id, callId));
      return undefined;
    }
    if (f.wakeAtMs > s.clock.now()) return undefined;
    return { kind: "TIMER_FIRED", payload: { callId } };
  };
  try {
    // A timer never waits for a lease: a live owner fires its own timers.
    await s.tasks.exclusive(id, () => deliver(s, id, make, false));
  } catch (e) {
    if (!(e instanceof RuntimeClosedError) && !(e instanceof ExecutionNotFoundError)) s.report(e);
  }
}

/** The store's due timers, but for those a run active here has armed itself. */
export async function fireDueTimers(s: RuntimeState): Promise<void> {
  const due = await s.store.dueTimers(s.clock.now(), 200);
  for (const t of due) {
    if (s.closed) return;
    const run = s.runs.get(t.executionId);
    if (run?.phase === "active" && s.timers.armed(t.executionId, t.timerId)) continue;
    await fireTimer(s, t.executionId, t.timerId);
  }
}

/** A supervisor's wake row came due (supervisor.ts): its row goes once it is acted on. */
async function fireWake(s: RuntimeState, id: string, timerId: string): Promise<void> {
  try {
    const done = await onWake(supervisorDeps(s), id, timerId);
    if (done === true) {
      await s.store.deleteTimer(id, timerId);
    } else {
      // Tried again later, behind the rows due now, so that rows that cannot be acted on yet
      // (held by another live owner, a watched child still running) never fill a tick's batch.
      const after = done === "later" ? WATCH_EVERY_MS : s.pollIntervalMs;
      await s.store.deferTimer(id, timerId, s.clock.now() + after);
    }
  } catch (e) {
    if (!(e instanceof RuntimeClosedError)) s.report(e);
  }
}

// ---- schedules -------------------------------------------------------------------------------

/** Stores a schedule of `flow` (runtime.ts `schedule`, schedules.ts SC2); idempotent. */
export async function schedule(
  s: RuntimeState,
  flow: string | Flow,
  options: ScheduleOptions,
): Promise<OwnedSchedule> {
  s.assertOpen();
  if (isFlow(flow)) registerFlow(s, flow);
  const flowName = isFlow(flow) ? flow.name : flow;
  if (!s.flows.has(flowName)) {
    throw new UnknownFlowError(`no flow named ${JSON.stringify(flowName)} is registered`);
  }
  if (options === null || typeof options !== "object") {
    throw new InvalidInputError("schedule needs options with a cron expression");
  }
  const name = checkedScheduleName(options.name ?? flowName);
  const principal = checkedPrincipal(options.principal);
  const timezone = options.timezone ?? "UTC";
  cronOf(options.cron, timezone, `schedule "${name}"`);
  const input = boundedJson(options.input, `input of schedule "${name}"`, s.limits.maxInputBytes);
  const stored: Omit<Schedule, "cursorMs" | "paused"> = {
    name,
    flow: flowName,
    cron: options.cron,
    timezone,
    fromMs: s.clock.now(),
  };
  if (input !== undefined) stored.input = input;
  // SC2: the owner first, so another principal's put changes nothing.
  const exists = (await s.store.listSchedules()).some((x) => x.name === name);
  const owner = await claimSchedule(s.store, name, principal, exists);
  authorizeSchedule(name, owner, principal, "put");
  await s.store.putSchedule(stored);
  s.nudge();
  const found = (await s.store.listSchedules()).find((x) => x.name === name);
  if (!found) throw new InvariantViolation(`schedule "${name}" was not stored`);
  return owner === undefined ? found : { ...found, principal: owner };
}

/** Removes a schedule (runtime.ts `unschedule`, SC2: its owner's only). */
export async function unschedule(
  s: RuntimeState,
  name: string,
  options: CallerOptions = {},
): Promise<void> {
  s.assertOpen();
  const checked = checkedScheduleName(name);
  authorizeSchedule(checked, await scheduleOwner(s.store, checked), callerOf(options));
  await s.store.deleteSchedule(checked);
}

/**
 * Pauses or resumes a schedule (runtime.ts `pauseSchedule`, `resumeSchedule`; SC4): its owner's
 * act (SC2). A resume moves the cursor to now, so what was missed while paused never starts.
 */
export async function setPaused(
  s: RuntimeState,
  name: string,
  paused: boolean,
  options: CallerOptions = {},
): Promise<OwnedSchedule> {
  s.assertOpen();
  const checked = checkedScheduleName(name);
  const owner = await scheduleOwner(s.store, checked);
  authorizeSchedule(checked, owner, callerOf(options));
  const cursorMs = paused ? Number.MIN_SAFE_INTEGER : s.clock.now();
  if (!(await s.store.setSchedulePaused(checked, paused, cursorMs))) {
    throw new ExecutionNotFoundError(`no schedule is named "${checked}"`);
  }
  if (!paused) s.nudge();
  const found = (await s.store.listSchedules()).find((x) => x.name === checked);
  if (!found) throw new ExecutionNotFoundError(`no schedule is named "${checked}"`);
  return owner === undefined ? found : { ...found, principal: owner };
}

/** The schedules `options.as` owns; without `as`, every one (runtime.ts `schedules`, SC2). */
export async function schedules(
  s: RuntimeState,
  options: CallerOptions = {},
): Promise<OwnedSchedule[]> {
  s.assertOpen();
  const as = callerOf(options);
  const out: OwnedSchedule[] = [];
  for (const x of await s.store.listSchedules()) {
    const owner = await scheduleOwner(s.store, x.name);
    if (as !== undefined && owner !== as) continue;
    out.push(owner === undefined ? x : { ...x, principal: owner });
  }
  return out;
}

/** The caller's principal, `as`, checked like a principal (ADR 0111). */
function callerOf(options: CallerOptions): string | undefined {
  if (options === null || typeof options !== "object") {
    throw new InvalidInputError("caller options must be an object");
  }
  return checkedPrincipal(options.as);
}

/** Starts every due occurrence of the schedules whose flow this runtime has. */
export async function fireSchedules(s: RuntimeState): Promise<string[]> {
  s.assertOpen();
  return fireStoredSchedules({
    store: s.store,
    clock: s.clock,
    flow: (name) => s.flows.get(name),
    start: (flow, input, id, principal) =>
      startOccurrence(s, flow, input, principal === undefined ? { id } : { id, principal }),
    closed: () => s.closed,
    report: (e) => s.report(e),
  });
}

// ---- recovery --------------------------------------------------------------------------------

/** Re-drives every pending or running execution whose owner is gone (W6). */
export async function recoverAbandoned(s: RuntimeState): Promise<string[]> {
  s.assertOpen();
  if (s.fleet && !s.options.recoverWhere) return claimRunnable(s, s.fleet);
  const recovered: string[] = [];
  let afterId: string | undefined;
  for (;;) {
    const page = await s.store.list({
      status: ["pending", "running"],
      limit: 200,
      ...(afterId ? { afterId } : {}),
    });
    for (const x of page) {
      if (s.closed) return recovered;
      if (!s.flows.has(x.flow) || s.stuck.has(x.executionId)) continue;
      if (s.options.recoverWhere && !s.options.recoverWhere(x.executionId)) continue;
      if (s.activeRuns() >= s.maxActive) return recovered;
      const run = s.runs.get(x.executionId);
      if (run?.phase === "active") continue;
      if (s.leases.liveElsewhere(await s.store.getLease(x.executionId))) continue;
      const driven = await s.tasks
        .exclusive(x.executionId, () => recoverOne(s, x.executionId))
        .catch((e: unknown) => quarantined(s, x.executionId, e));
      if (driven) recovered.push(x.executionId);
    }
    if (page.length < 200) return recovered;
    afterId = page[page.length - 1]?.executionId;
  }
}

/**
 * W6: an execution whose log cannot be read (LogCorruptError) is quarantined, not fatal: marked
 * stuck here (reported once, skipped by later recoveries) while recovery goes on with the rest.
 * Any other error is not this execution's alone (the store is down): it stops the recovery.
 */
function quarantined(s: RuntimeState, id: string, e: unknown): false {
  if (!isLoomError(e, "LOOM_LOG_CORRUPT")) throw e;
  s.markStuck(id, ensureError(e));
  return false;
}

/** L1: recovery in a fleet, by claims; drives each claimed execution it has room for. */
async function claimRunnable(s: RuntimeState, fleet: FleetMember): Promise<string[]> {
  const recovered: string[] = [];
  // Executions this member claims but cannot drive (stuck here, a version it does not accept)
  // come back at every claim (given back, they are released, and claims take released leases in
  // id order, after any expired ones): it claims past them, a bounded number, and stops when a
  // claim drives nothing new.
  let skip = 0;
  for (;;) {
    const room = s.maxActive - s.activeRuns();
    // No room (maxActive), or nothing to drive: the rest is other members' (L1).
    if (room <= 0 || s.flows.size === 0) return recovered;
    // Whole rows for the store, whatever maxActive is (2.5 asked PostgreSQL for LIMIT 2.5).
    const limit = Math.ceil(Math.min(CLAIM_BATCH, room)) + skip;
    const leases = await fleet.claim([...s.flows.keys()], limit);
    let driven = 0;
    for (const lease of leases) {
      const id = lease.executionId;
      const ok = await s.tasks
        .exclusive(id, () => driveClaimed(s, id, lease))
        .catch((e: unknown) => {
          if (isLoomError(e, "LOOM_LOG_CORRUPT")) return quarantined(s, id, e);
          s.report(e);
          return false;
        });
      if (ok) {
        driven++;
        recovered.push(id);
      }
    }
    if (s.closed || leases.length < limit) return recovered;
    const undriven = leases.length - driven;
    if ((driven === 0 && undriven <= skip) || undriven > MAX_CLAIM_SKIP) return recovered;
    skip = undriven;
  }
}

/** Drives an execution whose lease a claim took here; gives the lease back if it cannot. */
async function driveClaimed(s: RuntimeState, id: string, lease: Lease): Promise<boolean> {
  let driven = false;
  try {
    const cached = s.runs.get(id);
    if (cached?.phase === "parked") {
      // Parked here, then resumed elsewhere: taken back as recovery does (ownedRun checks what
      // moved since it parked), under a lease of its own.
      await s.leases.release(id, lease.fence);
      driven = true;
      const run = await ownedRun(s, id);
      run?.maybePark();
      return run !== undefined;
    }
    if (s.closed || s.stuck.has(id) || cached?.live) return false;
    const state = await loadState(s.store, id);
    driven = state !== undefined && drive(s, state, lease);
    return driven;
  } finally {
    if (!driven) await s.leases.release(id, lease.fence);
  }
}
