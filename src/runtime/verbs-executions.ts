/**
 * The public verbs that act on one execution: register a flow, start, handle, resume, cancel,
 * wait for the outcome, read its state or log, its live deltas (listing is verbs-list.ts's). Each takes the runtime's state
 * (runtime-state.ts); runtime.ts's Runtime hands it in, and keeps the TSDoc users read.
 *
 * Invariants (runtime.ts states them): W3 (what a verb does to one execution runs exclusive on
 * its id), W4 (start: every refusal before any append), W5 (start: a caller-chosen id is an
 * idempotent start), ADR 0111 (every verb on an existing execution authorizes first), ADR 0109
 * D4 (resume: addressed to a continued generation, routed to the chain's head).
 */
import { isTerminalStatus, type Envelope } from "../kernel/events.ts";
import {
  ExecutionNotFoundError,
  InvalidInputError,
  NonDeterminismError,
  NotResumableError,
  UnauthorizedError,
  UnknownFlowError,
  WaitTimeoutError,
  isLoomError,
} from "../kernel/errors.ts";
import { boundedJson, type Json } from "../kernel/json.ts";
import { assertValidId } from "../kernel/ids.ts";
import { checkedDuration } from "../kernel/limits.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { LiveDelta } from "../effects/deltas.ts";
import { isFlow, type Flow } from "./flow.ts";
import { endEvent, mustLoad } from "./load-state.ts";
import { positive, withDeadline } from "./runtime-support.ts";
import type { CallerOptions, ExecutionHandle } from "./runtime-options.ts";
import { outcomeOf, type Outcome } from "./outcome.ts";
import { delay } from "./system.ts";
import { checkedReason } from "./cancel.ts";
import { assertOwner, authorize, deliver } from "./runtime-core.ts";
import { cancelRouted, refuseIfSucceeded, route } from "./runtime-routing.ts";
import type { RuntimeState } from "./runtime-state.ts";

export function registerFlow(s: RuntimeState, flow: Flow): void {
  if (!isFlow(flow)) throw new InvalidInputError("registerFlow needs a flow made with flow$");
  const existing = s.flows.get(flow.name);
  // Already registered (a start by the flow object): nothing to check, nothing to wake for.
  if (existing === flow) return;
  if (existing) {
    throw new InvalidInputError(`a different flow named "${flow.name}" is already registered`);
  }
  if (flow.deadlineMs !== undefined) {
    checkedDuration(flow.deadlineMs, `flow "${flow.name}" deadlineMs`);
  }
  s.flows.set(flow.name, flow);
  s.nudge();
}

/** The registered flow `flow` names (registering it when it is one). */
export function registered(s: RuntimeState, flow: string | Flow): Flow {
  if (isFlow(flow)) registerFlow(s, flow);
  const name = isFlow(flow) ? flow.name : flow;
  const found = s.flows.get(name);
  if (!found) {
    throw new UnknownFlowError(`no flow named ${JSON.stringify(name)} is registered`);
  }
  return found;
}

/** A handle on `id`, acting as `caller` (runtime.ts `handle`). */
export function handle(s: RuntimeState, id: string, caller: CallerOptions = {}): ExecutionHandle {
  return {
    id,
    result: () => waitForCompletion(s, id, caller),
    cancel: (reason) => cancel(s, id, reason, caller),
    deltas: () => deltas(s, id, caller),
  };
}

/**
 * The text deltas of the execution's running LLM steps, on this runtime's bus (runtime.ts
 * `deltas`; effects/deltas.ts D1). Subscribed at once, so nothing published after the call is
 * missed, and handed out only once the caller is authorized (ADR 0111; deltas.ts D2). An id with
 * no log when it is read ends the subscription with nothing, as before.
 */
export function deltas(
  s: RuntimeState,
  id: string,
  caller: CallerOptions = {},
): AsyncIterableIterator<LiveDelta> {
  assertValidId(id);
  // Authorized against the log that exists when it is read: an id with no log yet has nothing
  // to watch (its owner may be anyone once it is started), so the subscription ends empty.
  const allowed = (async () => {
    const held = s.runs.get(id)?.state;
    if ((held === undefined || held.seq < 0) && (await s.store.head(id)) < 0) return false;
    await authorize(s, id, caller);
    return true;
  })();
  const ended = allowed.then((ok) => (ok ? outcome(s, id, {}) : undefined)).catch(() => undefined);
  return s.deltas.subscribe(id, ended, allowed);
}

/** Cancels an execution from any process sharing the store (runtime.ts `cancel`, K8.2). */
export async function cancel(
  s: RuntimeState,
  id: string,
  reason?: string,
  options: CallerOptions = {},
): Promise<boolean> {
  s.assertOpen();
  assertValidId(id);
  const why = checkedReason(reason);
  await authorize(s, id, options);
  return cancelRouted(s, id, why);
}

/** Answers the execution's suspend, routed to its chain's head (runtime.ts `resume`). */
export async function resume(
  s: RuntimeState,
  id: string,
  payload?: unknown,
  options: CallerOptions = {},
): Promise<void> {
  s.assertOpen();
  assertValidId(id);
  const json = boundedJson(payload, `resume payload for "${id}"`, s.limits.maxStepPayloadBytes);
  await authorize(s, id, options);
  // A resume addressed to a continued generation goes to the chain's head (ADR 0109 D4),
  // also when it continued while this resume was on its way (the start-to-commit window).
  // Routed whenever chains are on, with the start-to-commit probe: a resume the predecessor
  // took in that window would not reach the successor it already started.
  let target = s.chains ? await route(s, id) : id;
  for (let hops = 0; ; hops++) {
    try {
      return await resumeOne(s, target, json, options);
    } catch (e) {
      if (!s.chains || !(e instanceof NotResumableError) || hops >= s.maxChainHops) throw e;
      // Continued, or its successor started: route onward (the probe finds it), once a
      // rotation held here has committed (in its start-to-commit window routing lands here).
      const held = s.runs.get(target);
      if (held?.rotating) await held.done.catch(() => undefined);
      const next = await route(s, target);
      if (next === target) throw e;
      target = next;
    }
  }
}

/** Answers the execution's suspend (the oldest waiting one, or the next one it makes). */
async function resumeOne(
  s: RuntimeState,
  target: string,
  json: Json | undefined,
  caller: CallerOptions,
): Promise<void> {
  const rotating = s.runs.get(target);
  if (rotating?.rotating) {
    // Its generation is ending: the resume belongs to the successor (routed by the caller).
    await rotating.done.catch(() => undefined);
    throw new NotResumableError(`execution "${target}" continued while the resume was sent`);
  }
  await s.tasks.exclusive(target, () =>
    deliver(
      s,
      target,
      (state) => {
        if (isTerminalStatus(state.status)) {
          throw new NotResumableError(
            `execution "${target}" has ended (${state.status}) and cannot be resumed`,
          );
        }
        const payload: Json = json === undefined ? {} : { payload: json };
        return { kind: "RESUMED", payload };
      },
      true,
      async (state) => {
        assertOwner(state._principal, target, caller); // a start may have landed since `authorize`
        // A generation whose successor started (a rotation not yet committed, or crashed
        // before its commit) would keep the payload from the chain: refused, the caller routes.
        if (s.chains) await refuseIfSucceeded(s, state);
      },
    ),
  );
}

export async function waitForCompletion(
  s: RuntimeState,
  id: string,
  options: { timeoutMs?: number } & CallerOptions = {},
): Promise<Outcome> {
  assertValidId(id);
  await authorize(s, id, options);
  return outcome(s, id, options);
}

/** Module functions, not closures made on every wait (tsx names each closure it makes). */
const wrapOutcome = (o: Outcome) => ({ o });
const nothing = () => undefined;

/** Waits for `id`'s outcome (authorized by the caller of this function). */
async function outcome(
  s: RuntimeState,
  id: string,
  options: { timeoutMs?: number },
): Promise<Outcome> {
  if (options.timeoutMs !== undefined) positive(options.timeoutMs, 0, "timeoutMs");
  const giveUpAt =
    options.timeoutMs === undefined ? Infinity : performance.now() + options.timeoutMs;
  let pause = 10;
  for (;;) {
    const stuck = s.stuck.get(id);
    if (stuck) throw stuck;
    const ended = s.outcomes.get(id);
    if (ended) return ended;
    const run = s.runs.get(id);
    if (run?.phase === "active") {
      // The run settles `done` while this process drives it; once it parks, another process
      // may finish it, so the log decides from then on.
      const settled = await withDeadline(
        Promise.race([run.done.then(wrapOutcome), run.whenParked().then(nothing)]),
        giveUpAt - performance.now(),
      ).catch((e: unknown) => {
        if (isLoomError(e, "LOOM_WAIT_TIMEOUT") || e instanceof NonDeterminismError) throw e;
        return undefined;
      });
      if (settled) return settled.o;
      continue;
    }
    s.assertOpen();
    const head = await s.store.head(id);
    if (head < 0) throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
    if (await endEvent(s.store, id)) return outcomeOf(await mustLoad(s.store, id));
    const remaining = giveUpAt - performance.now();
    if (remaining <= 0) {
      throw new WaitTimeoutError(`execution "${id}" did not end within ${options.timeoutMs} ms`);
    }
    await delay(Math.min(pause, Math.max(1, remaining)));
    pause = Math.min(pause * 2, 250);
  }
}

export async function getState(
  s: RuntimeState,
  id: string,
  options: CallerOptions = {},
): Promise<ExecutionState> {
  assertValidId(id);
  await authorize(s, id, options);
  const run = s.runs.get(id);
  if (run?.phase === "active" && run.committedSeq === run.state.seq)
    return structuredClone(run.state);
  return mustLoad(s.store, id);
}

/**
 * What a run held here has committed, without a store read (runtime.ts `heldState`). ADR 0111:
 * an owned execution's only for its owner, checked against the owner the run holds.
 */
export function heldState(
  s: RuntimeState,
  id: string,
  caller: CallerOptions = {},
): ExecutionState | undefined {
  const run = s.runs.get(id);
  if (!run?.live || run.committedSeq !== run.state.seq) return undefined;
  const owner = run.state._principal;
  if (owner !== undefined && owner !== caller.as) {
    throw new UnauthorizedError(
      `${caller.as === undefined ? "an anonymous caller" : `principal ${JSON.stringify(caller.as)}`} may not act on execution "${id}": it belongs to another principal`,
      { executionId: id },
    );
  }
  return structuredClone(run.state);
}

export async function readLog(
  s: RuntimeState,
  id: string,
  options: CallerOptions = {},
): Promise<Envelope[]> {
  assertValidId(id);
  await authorize(s, id, options);
  return s.store.read(id);
}
