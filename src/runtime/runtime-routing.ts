/**
 * From the id a caller names to the generation that acts on it (ADR 0109): the runtime's routing,
 * with its memory of heads, and the cancel that reaches a chain's live generation. The walk
 * itself is chain-routing.ts's (K5..K8); what a cancel writes is cancel.ts's.
 *
 * Invariants (the runtime's, W1..W8 being runtime.ts's):
 * W9. A remembered head is routed to only while the addressed id still has a log (retention may
 *     have released it, and its caller was then authorized against no owner), except a head this
 *     runtime holds live and not rotating of a chain with no owner: the memory never lets a
 *     caller reach an owned chain through an id that is gone.
 * W10. A chain member's cancel reaches its live generation (ADR 0109 D2): the addressed one
 *     first, unless it has handed the chain on, then every verified successor forward.
 */
import { isTerminalStatus } from "../kernel/events.ts";
import { CancelledError, ChainHopLimitError, NotResumableError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { ExecutionState } from "../fold/state.ts";
import { endEvent, loadStart } from "./load-state.ts";
import { routeToHead, startedSuccessor } from "./chain-routing.ts";
import { cancelExecution } from "./cancel.ts";
import type { RuntimeState } from "./runtime-state.ts";

/** How many addressed ids remember the chain head routing last found for them. */
const KNOWN_HEADS = 1000;

/**
 * followToHead for a caller already authorized against `id`: routing follows only successors
 * with the same owner (K5), so the head needs no second check.
 */
export async function route(s: RuntimeState, id: string): Promise<string> {
  // Routing from the head last found for this id costs a probe, not the chain's walk.
  let known = s.knownHeads.get(id);
  // A head this runtime holds live and not rotating is still the head: a successor is started
  // only by the run that holds it, and a run another owner drove meanwhile is caught (and
  // dropped) when this one takes its lease back (ownedRun), so the caller routes again then.
  const held = known === undefined ? undefined : s.runs.get(known);
  if (held?.live && !held.rotating && !isTerminalStatus(held.state.status)) {
    // An owned chain is reached through a remembered head only while the addressed id has a
    // log (retention may have released it: its caller was authorized against no owner).
    if (held.state._principal === undefined || (await s.store.head(id)) >= 0) {
      return held.id;
    }
  }
  // Only while the addressed id has a log: once retention released it, a caller authorized
  // against no owner must not reach the chain through this memory.
  if (known !== undefined && known !== id && (await s.store.head(id)) < 0) {
    s.knownHeads.delete(id);
    known = undefined;
  }
  const head = await routeToHead(s.routing, known ?? id).catch((e: unknown) => {
    // The remembered head may be gone (retention): route from the addressed id itself.
    if (known === undefined) throw e;
    return routeToHead(s.routing, id);
  });
  s.knownHeads.delete(id);
  s.knownHeads.set(id, head);
  if (s.knownHeads.size > KNOWN_HEADS) {
    const oldest = s.knownHeads.keys().next().value;
    if (oldest !== undefined) s.knownHeads.delete(oldest);
  }
  return head;
}

/** NotResumableError when `state`'s verified successor has a log (one point read). */
export async function refuseIfSucceeded(s: RuntimeState, state: ExecutionState): Promise<void> {
  // A run held here that no other owner touched since it was last driven here has started no
  // successor unless it is rotating (a successor is started by the run that holds it).
  const held = s.runs.get(state.executionId);
  if (held?.state === state && held.live && held.untouched && !held.rotating) return;
  if ((await startedSuccessor(s.store, state)) !== undefined) {
    throw new NotResumableError(`execution "${state.executionId}" has a successor`);
  }
}

/** True when `id`'s log ends in a kernel EXECUTION_CONTINUED (one point read, or memory). */
export async function isContinued(s: RuntimeState, id: string): Promise<boolean> {
  const run = s.runs.get(id);
  if (run) return run.state.status === "continued";
  return (await endEvent(s.store, id))?.kind === "EXECUTION_CONTINUED";
}

/**
 * True when `id` ended cancelled (K4 (ii)), as the log says: a run in memory may be rotating
 * while another process's cancel is already durable. Two point reads.
 */
export async function wasCancelled(s: RuntimeState, id: string): Promise<boolean> {
  return (await endEvent(s.store, id))?.kind === "EXECUTION_CANCELLED";
}

/** Cancels exactly `id` (no routing); true when this call ended it. */
export async function cancelOne(s: RuntimeState, id: string, why: Json): Promise<boolean> {
  const cancelled = await s.tasks.exclusive(id, () =>
    cancelExecution(
      {
        store: s.store,
        journal: s.journal,
        clock: s.clock,
        leases: s.leases,
        ownerId: s.ownerId,
        run: (x) => s.runs.get(x),
        drop: (run) => {
          s.cache.remove(run);
          run.stop(new CancelledError(`execution "${run.id}" was cancelled`));
        },
      },
      id,
      why,
    ),
  );
  // A stuck execution (code that cannot replay it) is settled by the cancel: its outcome is
  // the log's from now on. Its batch may have written wake rows (children, a parent): now.
  if (cancelled) {
    s.stuck.delete(id);
    s.nudge();
  }
  return cancelled;
}

/** Cancels `id`, and with chains on its chain's live generation (authorized by the caller). */
export async function cancelRouted(s: RuntimeState, id: string, why: Json): Promise<boolean> {
  if (!s.chains) return cancelOne(s, id, why);
  // ADR 0109 D2 (W10): a chain member's cancel reaches its live generation. The addressed one is
  // cancelled first (so a successor it starts from now on cancels itself, K4), then every
  // verified successor forward, which covers one started in the start-to-commit window. One
  // whose successor has started is not cancelled: it has handed the chain on (its commit, or
  // recovery's, makes it continued), and the successor may already have ended the chain; the
  // cancel is for the generations from there on.
  const start = await loadStart(s.store, id);
  const handedOn = start && (await startedSuccessor(s.store, start)) !== undefined;
  let cancelled = handedOn ? false : await cancelOne(s, id, why);
  let at = id;
  for (;;) {
    const head = await routeToHead(s.routing, at);
    if (head === at) {
      // A continued member with no verified successor: the live generation is out of reach.
      if (await isContinued(s, at)) {
        throw new ChainHopLimitError(
          `the chain of "${id}" cannot be followed past "${at}", which continued: its successor is missing or not verified`,
          { from: id, furthest: at },
        );
      }
      return cancelled;
    }
    cancelled = (await cancelOne(s, head, why)) || cancelled;
    at = head;
  }
}
