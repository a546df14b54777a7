/**
 * Children and their supervision (ADR 0109 D5, D6, and the orchestration of ADR 0112 D5 they rely
 * on): `ctx.spawn` and `ctx.awaitChild`, and what the runtime does when a parent or a child ends.
 *
 * Invariants (tests cite O1..O7):
 * O1. The spawn is recorded in the parent's log (CHILD_STARTED) before the child's sequence 0 is
 *     written. A parent re-driven after a crash between the two writes the child then: the start
 *     is idempotent and adopts a sequence 0 only when it names this parent and spawn (else
 *     ChildConflictError). So no child exists without its parent's record.
 * O2. A child's chain ending settles its parent's slot, once (fold/children.ts F9). The head's
 *     terminal batch writes a wake row for the parent in its own transaction (fold/index-changes.ts
 *     W1), which any runtime's timer loop fires: the supervisor reads the child's outcome from its
 *     log and appends CHILD_DONE to the parent's head. An awaitChild whose child already ended
 *     records CHILD_DONE itself. Nothing is lost in a crash: the row is deleted only once the
 *     parent's head has the outcome, or has ended.
 * O3. A continued child is not settled (P3): its successor inherits `_parent`, and its head's end
 *     settles the slot of the id the parent spawned (the chain's id), after any number of
 *     rotations (D6).
 * O4. A parent that is cancelled or continues cancels every attached child whose slot is open, with
 *     reason `{ kind: "cascade", parent }`, routed to the child's head (D5), through wake rows its
 *     terminal batch writes. A detached child is never cascaded.
 * O5. A child's deadline ends no later than its parent's.
 * O6. A child spawned under a budget (the execution's, or a nested one around the spawn) is
 *     granted what is left of each, after what calls in flight hold (or less, as asked), recorded
 *     in CHILD_STARTED with the nested budgets' names; the parent counts the grant as spent in
 *     each until the slot settles with what the child's chain spent (F10), so children cannot
 *     spend past any budget around them.
 * O7. Awaiting a child this execution did not spawn is allowed only for one spawned by a member of
 *     its chain (a detached child of an earlier generation, its id in the carry); anything else is
 *     refused before anything is recorded.
 */
import { defineError, errorToData, InvalidInputError, UnknownFlowError } from "../kernel/errors.ts";
import {
  childIdOf,
  childOf,
  grantWithin,
  keyProblem,
  readChildOutcome,
  type ChildOutcome,
} from "../kernel/children.ts";
import { MAX_ID_LENGTH } from "../kernel/ids.ts";
import { boundedJson, type Json } from "../kernel/json.ts";
import { checkedBudget, isFlow, type Flow } from "./flow.ts";
import { AWAIT_CHILD } from "../fold/children.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";
import { addResources, type Budget, type ResourceSnapshot } from "../kernel/resources.ts";
import { budgetsInForce } from "./budgets-in-force.ts";
import { checkedDuration } from "../kernel/limits.ts";
import { validated } from "../kernel/schema.ts";
import { startPayload } from "./runtime-support.ts";
import type { ChildHandle, FlowContext, SpawnOptions } from "./contract.ts";
import type { ChildDeps, ContextDeps } from "./context-deps.ts";

export type { ChildHandle, SpawnOptions } from "./contract.ts";
export type { ChildDeps } from "./context-deps.ts";
import { halted, type EventSpec } from "./run.ts";
import { own, type Scope } from "./syscalls-scope.ts";

/** A child awaited with ctx.awaitChild ended failed or cancelled (its error is `details.error`). */
export class ChildFailedError extends defineError("LOOM_CHILD_FAILED") {}

/** A child id already holds an execution that another spawn started (O1). */
export class ChildConflictError extends defineError("LOOM_CHILD_CONFLICT") {}

const keyOf = (flow: string, key: unknown): string => {
  if (key === undefined) return keyProblem(flow) === undefined ? flow : "child";
  if (typeof key !== "string") throw new InvalidInputError("a spawn key must be a string");
  const problem = keyProblem(key);
  if (problem) throw new InvalidInputError(`spawn key ${JSON.stringify(key)}: ${problem}`);
  return key;
};

/**
 * What a spawn records, decided against the parent's state now (O5, O6): the grant is what is
 * left of every budget `around` the spawn.
 */
function spawnPayload(
  state: ExecutionState,
  around: readonly { name: string; budget: Budget; spent: ResourceSnapshot }[],
  head: { callId: string; scope: string; key: string; childId: string },
  flow: Flow,
  input: Json | undefined,
  options: { detached: boolean; budget: Budget | undefined; deadlineMs: number | undefined },
  now: number,
): { [k: string]: Json } {
  const payload: { [k: string]: Json } = {
    callId: head.callId,
    scope: head.scope,
    name: head.key,
    childId: head.childId,
    flow: flow.name,
    detached: options.detached,
  };
  if (input !== undefined) payload.input = input;
  // A detached child spends from the parent's budget too: detaching is about cancellation.
  if (around.length > 0) {
    payload.budget = grantWithin(around, options.budget) as Json;
    payload.granted = true;
    const nested = around.flatMap((b) => (b.name === "execution" ? [] : [b.name]));
    if (nested.length > 0) payload.budgets = nested;
  } else if (options.budget) {
    payload.budget = options.budget as Json;
  }
  // O5: an absolute time, so the child's own start (later than now) cannot stretch it.
  const own = options.deadlineMs ?? flow.deadlineMs;
  let deadlineAtMs = own === undefined ? undefined : now + own;
  if (state.deadlineMs !== undefined) {
    const parentEnd = state.startedAt + state.deadlineMs;
    deadlineAtMs = deadlineAtMs === undefined ? parentEnd : Math.min(deadlineAtMs, parentEnd);
  }
  if (deadlineAtMs !== undefined) payload.deadlineAtMs = deadlineAtMs;
  return payload;
}

/** `ctx.spawn` and `ctx.awaitChild` of one scope (made by `makeContext`, which owns R6/R7). */
export function childSyscalls(s: Scope): Pick<FlowContext, "spawn" | "awaitChild"> {
  const { deps, call } = s;
  return {
    async spawn(flow: string | Flow, input?: unknown, options: SpawnOptions = {}) {
      if (options === null || typeof options !== "object") {
        throw new InvalidInputError("spawn options must be an object");
      }
      const name = isFlow(flow) ? flow.name : flow;
      if (typeof name !== "string" || name === "") {
        throw new InvalidInputError("ctx.spawn needs a flow or a flow's name");
      }
      const key = keyOf(name, options.key);
      const json = boundedJson(input, `input of child flow "${name}"`, deps.limits.maxInputBytes);
      const settings = {
        detached: options.detached === true,
        budget: options.budget === undefined ? undefined : checkedBudget(options.budget, "spawn"),
        deadlineMs:
          options.deadlineMs === undefined
            ? undefined
            : checkedDuration(options.deadlineMs, "spawn deadlineMs"),
      };
      return call("spawn", () => spawnIn(s, name, key, json, settings));
    },

    async awaitChild<T = Json>(child: ChildHandle | string): Promise<T> {
      const childId = typeof child === "string" ? child : child?.id;
      if (typeof childId !== "string" || childId === "") {
        throw new InvalidInputError("ctx.awaitChild needs a child handle or a child id");
      }
      return call("awaitChild", () => awaitIn<T>(s, childId));
    },
  };
}

/** `ctx.spawn` inside its call: records the spawn (once) and starts the child (O1). */
async function spawnIn(
  s: Scope,
  name: string,
  key: string,
  json: Json | undefined,
  settings: { detached: boolean; budget: Budget | undefined; deadlineMs: number | undefined },
): Promise<ChildHandle> {
  const { run, deps, scope } = s;
  const claim = run.claim(scope, "spawn", key);
  // The i-th spawn under `key` in this scope: `<parentId>::<key>#<i>` at the root (P1). A
  // recorded spawn keeps the id it recorded (a fork's or a restore's copy names the
  // original's child, which it does not own).
  const recordedId = run.state.frames[claim.callId]?.childId;
  const childId = claim.recorded && recordedId ? recordedId : childIdOf(run.id, claim.callId);
  if (!claim.recorded) {
    // Needed only to record a spawn: a re-run replays one without the child's code.
    const registered = childDepsOf(deps).flow(name);
    if (!registered) {
      throw new UnknownFlowError(`ctx.spawn: no flow named ${JSON.stringify(name)} is registered`);
    }
    if (childId.length > MAX_ID_LENGTH) {
      throw new InvalidInputError(
        `ctx.spawn: the child id "${childId}" would be over ${MAX_ID_LENGTH} characters; use a shorter key`,
      );
    }
    if (registered.input !== undefined) {
      const value = await validated(registered.input, json, `the input of child flow "${name}"`);
      json = boundedJson(value, `input of child flow "${name}"`, deps.limits.maxInputBytes);
    }
    const head = { callId: claim.callId, scope, key, childId };
    // O6: what is left of each budget around the spawn, after what calls in flight hold.
    const around = budgetsInForce(run, s.nested).map((b) => ({
      name: b.name,
      budget: b.budget,
      spent: addResources(b.spent, run.reservations.heldAgainst(b.name, "")),
    }));
    const payload = spawnPayload(run.state, around, head, registered, json, settings, deps.now());
    const done = run.enqueue([{ kind: "CHILD_STARTED", payload }]);
    claim.take();
    await done;
  }
  const record = childOf(run.state._children, childId);
  const handle: ChildHandle = { id: childId, flow: name, detached: settings.detached };
  // O1: the child exists from here on (on a re-run, it is written now if a crash lost it),
  // unless its slot settled (retention may have released it: it must not run again) or it
  // is not this execution's own.
  if (!record || record.outcome || childId !== childIdOf(run.id, claim.callId)) {
    return own(handle);
  }
  try {
    await childDepsOf(deps).startChild(run.state, childId);
  } catch (e) {
    if (!(e instanceof ChildConflictError)) {
      // Not the flow's failure (a store error, a missing flow on this runtime): the run
      // stops without an outcome and recovery re-drives it, so a re-run cannot diverge.
      run.stop(e instanceof Error ? e : new Error(String(e)));
      return halted<ChildHandle>();
    }
    // The id holds someone else's execution: the slot settles failed, once, so nothing of
    // that execution is read or cancelled through it (O1).
    if (!record.outcome) {
      const outcome = { status: "failed", error: errorToData(e) } as unknown as Json;
      await run.enqueue([{ kind: "CHILD_DONE", payload: { childId, outcome } }]);
    }
    throw e;
  }
  return own(handle);
}

/** `ctx.awaitChild` inside its call: waits for the child's slot to settle (O2, O7). */
async function awaitIn<T>(s: Scope, childId: string): Promise<T> {
  const { run, deps, scope } = s;
  const claim = run.claim(scope, "child", AWAIT_CHILD);
  const callId = claim.callId;
  if (!claim.recorded) {
    const known = childOf(run.state._children, childId);
    let ours: boolean;
    let ended: ChildOutcome | undefined;
    const kids = childDepsOf(deps);
    try {
      ours = known !== undefined;
      ours ||= await kids.spawnedInChain(childId, chainOf(run.state).chainId);
      // O2: a child that already ended settles the wait in the same batch.
      if (ours && !known?.outcome) ended = await kids.childOutcome(childId);
    } catch (e) {
      // A store that failed is not the flow's failure: the run stops without an outcome
      // (R6) and recovery re-drives it, as receive does.
      run.stop(e instanceof Error ? e : new Error(String(e)));
      return halted<T>();
    }
    if (!ours) {
      throw new InvalidInputError(
        `ctx.awaitChild: "${childId}" is not a child of execution "${run.id}" or of its chain`,
      );
    }
    const specs: EventSpec[] = [
      { kind: "SUSPENDED", payload: { callId, scope, name: AWAIT_CHILD, childId } },
    ];
    if (ended) {
      specs.push({
        kind: "CHILD_DONE",
        payload: { childId, outcome: ended as unknown as Json },
      });
    }
    const done = run.enqueue(specs);
    claim.take();
    await done;
  } else if (run.state.frames[callId]?.childId !== childId) {
    throw new InvalidInputError(
      `ctx.awaitChild ${callId} of execution "${run.id}" was recorded for another child than "${childId}"`,
    );
  }
  if (run.state.frames[callId]?.status === "waiting") await run.waitFor(scope, callId);
  const outcome = readChildOutcome(run.state.frames[callId]?.output);
  if (!outcome) return halted<T>();
  if (outcome.status === "completed") return own(outcome.output) as T;
  throw new ChildFailedError(
    `child "${childId}" ${outcome.status}${outcome.error ? `: ${outcome.error.message}` : ""}`,
    { childId, status: outcome.status, error: (outcome.error ?? null) as unknown as Json },
  );
}

/** What the runtime gives the child syscalls; refused where nothing supervises children. */
function childDepsOf(deps: ContextDeps): ChildDeps {
  if (!deps.children) throw new InvalidInputError("children need a runtime that supervises them");
  return deps.children;
}

/** The sequence 0 of a spawned child, from its parent's record of the spawn (O1, O5, O6). */
export function childStartPayload(
  parent: ExecutionState,
  childId: string,
  flow: Flow,
): { [k: string]: Json } | undefined {
  const record = childOf(parent._children, childId);
  const spawn = record ? parent.frames[record.callId] : undefined;
  if (!record || !spawn) return undefined;
  const payload = startPayload(flow, spawn.input, { budget: record.budget, deadlineMs: undefined });
  if (record.deadlineAtMs !== undefined) payload.deadlineAtMs = record.deadlineAtMs;
  payload.parent = {
    executionId: parent.executionId,
    chainId: chainOf(parent).chainId,
    callId: record.callId,
    detached: record.detached,
  };
  if (record.granted) payload.parent.granted = true; // N2
  if (parent._principal !== undefined) payload.principal = parent._principal;
  if (parent._subject !== undefined) payload.subject = parent._subject;
  return payload;
}
