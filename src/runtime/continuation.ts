/**
 * `ctx.continueAsNew` (ADR 0109): the rotation of a generation into its successor. The routing
 * that keeps a chain addressable by any of its ids is chain-routing.ts (re-exported here).
 *
 * Invariants (tests cite K1..K4; K5..K8, routing, are chain-routing.ts's):
 * K1. Successor first, then the commit (D2): the successor's sequence 0 is durable before the
 *     predecessor's EXECUTION_CONTINUED is appended, under the predecessor's fence. A crash
 *     between the two leaves a running predecessor that recovery re-drives to the same
 *     continueAsNew and carry; the start then adopts the successor and the commit lands.
 * K2. What a successor inherits is read from the predecessor's committed fold, after every
 *     append of the predecessor committed: resources and quota, inbox cursors and dedupe window,
 *     the budget, the principal and the chain deadline (fixed at generation 0).
 * K3. An existing sequence 0 at the successor id is adopted only when it names this predecessor;
 *     otherwise ContinuationConflictError fails the predecessor (D2 (b)).
 * K4. A cancelled chain has no live generation: a cancel that lands during the rotation cancels
 *     the successor too, and a successor whose predecessor was cancelled cancels itself before
 *     its first step (D2, the two closures).
 */
import type { Clock } from "../kernel/clock.ts";
import { successorIdOf, type Carried } from "../kernel/chain.ts";
import { ContinuationConflictError, errorToData } from "../kernel/errors.ts";
import { EVENT_SCHEMA_VERSION } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";
import { openChildren } from "../fold/children.ts";
import type { Store } from "../store/spi.ts";
import type { Flow } from "./flow.ts";
import type { Run } from "./run.ts";

export { isVerifiedSuccessor, routeToHead, startedSuccessor } from "./chain-routing.ts";

export interface ChainDeps {
  store: Store;
  clock: Clock;
  maxChainHops: number;
  /** The flow registered now under `name` (a successor runs current code, D3). */
  flow(name: string): Flow | undefined;
  /**
   * Kernel-private start of a successor: writes sequence 0 with `payload` and drives it, or
   * adopts an existing sequence 0 that `accept` approves (else `accept` throws).
   */
  startSuccessor(
    flow: Flow,
    id: string,
    payload: { [k: string]: Json },
    accept: (existing: ExecutionState) => void,
  ): Promise<void>;
  /** Cancels `id` (not routed) with `reason`. */
  cancel(id: string, reason: Json): Promise<boolean>;
  /** Whether `id`'s log ends in EXECUTION_CANCELLED (durable, not memory). */
  cancelled(id: string): Promise<boolean>;
  report(error: unknown): void;
}

/** What a successor's sequence 0 records (K2): its chain place, carry and inheritance. */
export function successorStart(
  state: ExecutionState,
  flow: Flow,
  carry: Json | undefined,
): { id: string; payload: { [k: string]: Json } } {
  const chain = chainOf(state);
  const generation = chain.generation + 1;
  const carried: Carried = {};
  if (state._resources) carried.resources = state._resources;
  // Children whose slots are open travel as records: their grants stay counted (F10) until their
  // CHILD_DONE, routed to the chain's head, settles them there.
  const open = openChildren(state);
  if (open) carried.children = open;
  if (state._quotaExceeded) carried.quotaExceeded = state._quotaExceeded;
  if (state._inbox) carried.inbox = state._inbox;
  if (state._scopeResources) carried.scopeResources = state._scopeResources;
  // A resume that came while nothing waited is owed to the chain, not lost with a generation.
  if (state._resumePayloads.length > 0) carried.resumePayloads = state._resumePayloads;
  const chainDeadline =
    chain.continuedFrom?.carried.chainDeadline ??
    (state.deadlineMs === undefined ? undefined : state.startedAt + state.deadlineMs);
  if (chainDeadline !== undefined) carried.chainDeadline = chainDeadline;
  const payload: { [k: string]: Json } = {
    flow: flow.name,
    flowVersion: flow.version,
    fingerprint: flow.fingerprint,
    schemaVersion: EVENT_SCHEMA_VERSION,
    chainId: chain.chainId,
    generation,
    continuedFrom: { executionId: state.executionId, carried: carried as unknown as Json },
  };
  if (carry !== undefined) payload.input = carry;
  if (state._budget) payload.budget = state._budget as unknown as Json;
  if (flow.deadlineMs !== undefined) payload.deadlineMs = flow.deadlineMs;
  if (state._principal !== undefined) payload.principal = state._principal;
  if (state._subject !== undefined) payload.subject = state._subject;
  // QF4: the successor holds its predecessor's slot in the queue, admitted already.
  const queue = state._queue;
  if (queue) {
    const { name, priority, key } = queue;
    const mark = { name, priority, admittedAt: queue.admittedAt ?? state.startedAt };
    payload.queue = key === undefined ? mark : { ...mark, key };
  }
  // A child's successor is still its parent's child (D6): the head's end settles the slot.
  if (state._parent) payload.parent = state._parent as unknown as Json;
  return { id: successorIdOf(chain.chainId, generation), payload };
}

/**
 * Rotates `run` (its body called continueAsNew with `carry`): K1..K4. Settles the run: it ends
 * `continued`, or fails with ContinuationConflictError, or stops (a storage failure before the
 * successor was durable: recovery re-drives it).
 */
export async function rotate(
  deps: ChainDeps,
  run: Run,
  carry: Json | undefined,
  drained: () => Promise<void>,
): Promise<void> {
  try {
    await drained();
    if (!run.active || run.committedSeq !== run.state.seq) return;
    const flow = deps.flow(run.flow.name) ?? run.flow;
    const { id, payload } = successorStart(run.state, flow, carry);
    try {
      await deps.startSuccessor(flow, id, payload, (existing) => {
        // K3: adopt only the successor this predecessor started.
        if (existing._chain?.continuedFrom?.executionId !== run.id) {
          throw new ContinuationConflictError(
            `execution "${run.id}" cannot continue as "${id}": that id already holds an execution that is not its successor`,
            { executionId: run.id, successorId: id },
          );
        }
      });
    } catch (e) {
      if (e instanceof ContinuationConflictError && run.active) {
        const error = errorToData(e) as unknown as Json;
        await run.enqueue([{ kind: "EXECUTION_FAILED", payload: { error }, kernel: true }]);
        return;
      }
      throw e;
    }
    const chain = chainOf(run.state);
    const committed = run.active
      ? run
          .enqueue([
            {
              kind: "EXECUTION_CONTINUED",
              payload: {
                successorId: id,
                chainId: chain.chainId,
                generation: chain.generation + 1,
              },
              kernel: true,
            },
          ])
          .then(
            () => true,
            () => false,
          )
      : Promise.resolve(false);
    // Decided by the append, not by memory (which folded the commit before appending it).
    if (!(await committed) && (await deps.cancelled(run.id))) {
      // K4: the predecessor was cancelled in the window: no live successor stays. (A commit
      // that failed otherwise leaves the predecessor running: recovery re-drives it to adopt.)
      await deps.cancel(id, { kind: "cascade", parent: run.id });
    }
  } catch (e) {
    const error = e instanceof Error ? e : new Error(String(e));
    run.stop(error);
    deps.report(error);
  }
}
