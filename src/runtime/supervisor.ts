/**
 * The supervisor (children.ts O1..O4, O7): what the runtime does to start a spawned child, to find
 * how a child's chain ended, and when a wake row (fold/index-changes.ts W1, W2) comes due. It keeps
 * no state of its own: every decision is read from the logs, so any runtime, after any crash,
 * reconciles the same way.
 */
import { isTerminalStatus, type ExecutionStatus } from "../kernel/events.ts";
import { cascadeReason, childOf, type ChildOutcome } from "../kernel/children.ts";
import {
  ChainHopLimitError,
  ExecutionNotFoundError,
  InvariantViolation,
  UnknownFlowError,
} from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";
import { awaitedChildren, openAttachedChildren, spentWithGrants } from "../fold/children.ts";
import type { Store } from "../store/spi.ts";
import { routeToHead } from "./chain-routing.ts";
import { isWakeId } from "../fold/index-changes.ts";
import { ChildConflictError, childStartPayload } from "./children.ts";
import type { Flow } from "./flow.ts";
import { loadStart, loadState } from "./load-state.ts";
import type { EventSpec } from "./run.ts";

const CHILD_WAKE = "child:";
const CASCADE_WAKE = "cascade:";
const WATCH = "watch:";
/** How long a watch row (W3) waits before it looks at a running child again. */
export const WATCH_EVERY_MS = 1000;

export interface SupervisorDeps {
  store: Store;
  maxChainHops: number;
  flow(name: string): Flow | undefined;
  /** The kernel-private, idempotent create (runtime-core.ts `create`), exclusive on `id`. */
  create(
    flow: Flow,
    id: string,
    payload: { [k: string]: Json },
    accept: (existing: ExecutionState) => void,
  ): Promise<void>;
  /**
   * Appends what `make` returns to `id`'s log and keeps it going (runtime-core.ts `deliver`),
   * exclusive on `id`; false when another live owner holds it (try again later), "moved" when
   * `id` has a successor or is rotating into one (route again: the slot's record went with it).
   */
  deliver(
    id: string,
    make: (state: ExecutionState) => EventSpec[] | undefined,
  ): Promise<boolean | "moved">;
  /** Cancels `id` and its chain's live generation (runtime.ts `cancel`). */
  cancel(id: string, reason: Json): Promise<unknown>;
}

/** O1: writes the child's sequence 0 as `parent`'s record of the spawn says, or adopts it. */
export async function startChild(
  deps: SupervisorDeps,
  parent: ExecutionState,
  childId: string,
): Promise<void> {
  const record = childOf(parent._children, childId);
  if (!record) {
    throw new InvariantViolation(`execution "${parent.executionId}" has no child "${childId}"`);
  }
  const mine = (existing: ExecutionState) => {
    const link = existing._parent;
    if (link?.executionId !== parent.executionId || link.callId !== record.callId) {
      throw new ChildConflictError(
        `execution "${childId}" already exists and is not the child execution "${parent.executionId}" spawned`,
        { childId, parent: parent.executionId },
      );
    }
  };
  // Adopted without its code: a runtime replaying the parent need not have the child's flow.
  const existing = await loadStart(deps.store, childId);
  if (existing) return mine(existing);
  const flow = deps.flow(record.flow);
  if (!flow) {
    throw new UnknownFlowError(
      `child "${childId}" runs flow ${JSON.stringify(record.flow)}, which is not registered`,
    );
  }
  const payload = childStartPayload(parent, childId, flow);
  if (!payload) throw new InvariantViolation(`the spawn of "${childId}" has no frame`);
  await deps.create(flow, childId, payload, mine);
}

/** How the chain `childId` heads ended (P3: never `continued`), or undefined while it runs. */
export async function childOutcome(
  deps: Pick<SupervisorDeps, "store" | "maxChainHops">,
  childId: string,
): Promise<ChildOutcome | undefined> {
  // A chain that has not settled where routing can reach (past maxChainHops) is still running,
  // as is one with no log yet.
  const head = await routeToHead(deps, childId).catch((e: unknown) => {
    if (e instanceof ExecutionNotFoundError || e instanceof ChainHopLimitError) return undefined;
    throw e;
  });
  const state = head === undefined ? undefined : await loadState(deps.store, head);
  if (!state || !isTerminalStatus(state.status) || state.status === "continued") return undefined;
  const outcome: ChildOutcome = { status: state.status as ChildOutcome["status"] };
  if (state.output !== undefined) outcome.output = state.output;
  if (state.error) outcome.error = state.error;
  // What its chain spent, with the grants it passed on to children still running (F10).
  const spent = spentWithGrants(state);
  if (Object.keys(spent).length > 0) outcome.resources = spent;
  return outcome;
}

/** O7: whether `childId` was spawned by a member of the chain `chainId` (one point read). */
export async function spawnedInChain(
  store: Store,
  childId: string,
  chainId: string,
): Promise<boolean> {
  return (await loadStart(store, childId))?._parent?.chainId === chainId;
}

/** Whether a timer row is a supervisor's (W1..W3), not a flow's wait. */
export const isWake = isWakeId;

/**
 * Acts on a due wake row of `id` (O2, O4, W3); true once it is done with (the row can go), false
 * when it must be tried again (the execution to write to is held by another live owner), "later"
 * when it is to be looked at again in WATCH_EVERY_MS (a watched child still runs).
 */
export async function onWake(
  deps: SupervisorDeps,
  id: string,
  timerId: string,
): Promise<boolean | "later"> {
  if (timerId.startsWith(CHILD_WAKE)) return settleSlot(deps, id, timerId.slice(CHILD_WAKE.length));
  if (timerId.startsWith(WATCH)) return settleSlot(deps, id, timerId.slice(WATCH.length), true);
  if (timerId.startsWith(CASCADE_WAKE)) {
    await cascadeFrom(deps, timerId.slice(CASCADE_WAKE.length), id);
    return true;
  }
  return true;
}

/**
 * O2, O3: the parent's head (the parent may have continued) learns how `childId` ended. Only a
 * generation that waits for it (fold/children.ts awaitedChildren) is written to: the one that
 * spawned the child, a successor its slot was carried to, one that awaits it from the carry. A
 * generation that settled it (and then continued, leaving it behind) or never had it gets
 * nothing, and one that is handing its slots on to a successor (its start-to-commit window) is
 * skipped for the successor.
 */
async function settleSlot(
  deps: SupervisorDeps,
  parentId: string,
  childId: string,
  watching = false,
): Promise<boolean | "later"> {
  const route = (): Promise<string | undefined> =>
    routeToHead(deps, parentId).catch((e: unknown) => {
      if (e instanceof ExecutionNotFoundError) return undefined;
      throw e;
    });
  if (watching) {
    // W3: watched only while the watcher's chain holds the slot open.
    const head = await route();
    const state = head === undefined ? undefined : await loadState(deps.store, head);
    if (!state || isTerminalStatus(state.status) || !awaitedChildren(state).has(childId)) {
      return true;
    }
  }
  const outcome = await childOutcome(deps, childId);
  // Not ended: a watch looks again later; a wake row written by a generation that continued is
  // never written (W1), so there is nothing to do.
  if (!outcome) return watching ? "later" : true;
  const make = (state: ExecutionState): EventSpec[] | undefined => {
    if (isTerminalStatus(state.status) || !awaitedChildren(state).has(childId)) return undefined;
    return [{ kind: "CHILD_DONE", payload: { childId, outcome: outcome as unknown as Json } }];
  };
  for (let hops = 0; hops <= deps.maxChainHops; hops++) {
    const target = await route();
    if (target === undefined) return true;
    const delivered = await deps.deliver(target, make);
    if (delivered !== "moved") return delivered;
  }
  // Still rotating after that many routes: the row stays, and is tried again.
  return false;
}

const CASCADING: readonly ExecutionStatus[] = ["cancelled", "continued"];

/** O4: cancels `childId` if its parent ended cancelled or continued with its slot open. */
async function cascadeFrom(deps: SupervisorDeps, parentId: string, childId: string) {
  const parent = await loadState(deps.store, parentId);
  if (!parent || !CASCADING.includes(parent.status)) return;
  if (!openAttachedChildren(parent).includes(childId)) return;
  // Only a child of this chain (its sequence 0 says so): never an execution that merely holds
  // the id a spawn wanted, and nothing when the child was never written.
  const link = (await loadStart(deps.store, childId))?._parent;
  if (link?.chainId !== chainOf(parent).chainId) return;
  await deps.cancel(childId, cascadeReason(parentId));
}
