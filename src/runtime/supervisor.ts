/**
 * The supervisor (children.ts O1..O4, O7): what the runtime does to start a spawned child, to find
 * how a child's chain ended, and when a wake row (fold/index-changes.ts W1, W2) comes due. It keeps
 * no state of its own: every decision is read from the logs, so any runtime, after any crash,
 * reconciles the same way.
 */
import { isTerminalStatus, type ExecutionStatus } from "../kernel/events.ts";
import { cascadeReason, childOf, type ChildOutcome } from "../kernel/children.ts";
import { ExecutionNotFoundError, InvariantViolation, UnknownFlowError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";
import { openAttachedChildren, spentWithGrants } from "../fold/children.ts";
import type { Store } from "../store/spi.ts";
import { routeToHead } from "./chain-routing.ts";
import { isWakeId } from "../fold/index-changes.ts";
import { ChildConflictError, childStartPayload } from "./children.ts";
import type { Flow } from "./flow.ts";
import { loadStart, loadState } from "./load-state.ts";
import type { EventSpec } from "./run.ts";

const CHILD_WAKE = "child:";
const CASCADE_WAKE = "cascade:";

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
   * exclusive on `id`; false when another live owner holds it (try again later).
   */
  deliver(id: string, make: (state: ExecutionState) => EventSpec[] | undefined): Promise<boolean>;
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
  const head = await routeToHead(deps, childId).catch((e: unknown) => {
    if (e instanceof ExecutionNotFoundError) return undefined;
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

/** Whether a timer row is a supervisor's wake row (W1, W2), not a flow's wait. */
export const isWake = isWakeId;

/**
 * Acts on a due wake row of `id` (O2, O4); true once it is done with (the row can go), false
 * when it must be tried again (the execution to write to is held by another live owner).
 */
export async function onWake(deps: SupervisorDeps, id: string, timerId: string): Promise<boolean> {
  if (timerId.startsWith(CHILD_WAKE)) return settleSlot(deps, id, timerId.slice(CHILD_WAKE.length));
  if (timerId.startsWith(CASCADE_WAKE)) {
    await cascadeFrom(deps, timerId.slice(CASCADE_WAKE.length), id);
    return true;
  }
  return true;
}

/** O2, O3: the parent's head (the parent may have continued) learns how `childId` ended. */
async function settleSlot(deps: SupervisorDeps, parentId: string, childId: string) {
  const outcome = await childOutcome(deps, childId);
  // Not ended (a row written by a generation that continued is never written: W1): nothing yet.
  if (!outcome) return true;
  const target = await routeToHead(deps, parentId).catch((e: unknown) => {
    if (e instanceof ExecutionNotFoundError) return undefined;
    throw e;
  });
  if (target === undefined) return true;
  return deps.deliver(target, (state) => {
    if (isTerminalStatus(state.status) || childOf(state._children, childId)?.outcome) {
      return undefined;
    }
    return [{ kind: "CHILD_DONE", payload: { childId, outcome: outcome as unknown as Json } }];
  });
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
