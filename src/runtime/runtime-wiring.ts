/**
 * What the rooms below the runtime act through, made from its state: a run's context
 * (context-deps.ts: the chain of effect middleware, the inbox, rotation, children), a rotation
 * (continuation.ts ChainDeps) and the supervisor (supervisor.ts SupervisorDeps). Each is a set
 * of closures over the state, so those rooms never see the runtime (runtime.ts W8).
 *
 * Invariant: every create and delivery these closures make runs exclusive on its execution id
 * (W3), as the verbs' own do.
 */
import { NotResumableError } from "../kernel/errors.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { ContextDeps } from "./context.ts";
import { rotate, type ChainDeps } from "./continuation.ts";
import { childOutcome, spawnedInChain, startChild, type SupervisorDeps } from "./supervisor.ts";
import { create, deliver } from "./runtime-core.ts";
import { cancelOne, cancelRouted, refuseIfSucceeded, wasCancelled } from "./runtime-routing.ts";
import type { RuntimeState } from "./runtime-state.ts";

/** What every run's context acts through: made once per runtime (RuntimeState.contextDeps). */
export function contextDeps(s: RuntimeState): ContextDeps {
  return {
    limits: s.limits,
    now: () => s.clock.now(),
    chain: s.chain,
    readInbox: (chainId, topic, afterSeq) => s.readInbox(chainId, topic, afterSeq),
    maxCarryBytes: s.maxCarryBytes,
    negotiation: s.negotiation,
    prices: s.prices,
    deltas: s.deltas,
    rotate: s.chains
      ? (run, carry) => void rotate(chainDeps(s), run, carry, () => run.quiesced())
      : undefined,
    children: {
      flow: (name) => s.flows.get(name),
      startChild: (parent, childId) => startChild(supervisorDeps(s), parent, childId),
      childOutcome: (childId) => childOutcome(supervisorDeps(s), childId),
      spawnedInChain: (childId, chainId) => spawnedInChain(s.store, childId, chainId),
    },
  };
}

/** What the supervisor acts through (supervisor.ts). */
export function supervisorDeps(s: RuntimeState): SupervisorDeps {
  return {
    store: s.store,
    maxChainHops: s.maxChainHops,
    flow: (name) => s.flows.get(name),
    create: (flow, id, payload, accept) =>
      s.tasks.exclusive(id, () => create(s, flow, id, payload, accept)),
    deliver: async (id, make) => {
      // A generation with a successor would keep the outcome from the slot it carried there.
      const check = s.chains ? (x: ExecutionState) => refuseIfSucceeded(s, x) : undefined;
      try {
        return await s.tasks.exclusive(id, () => deliver(s, id, make, false, check));
      } catch (e) {
        if (!(e instanceof NotResumableError)) throw e;
        // A rotation held here is not waited for in the tick: the row is tried again (its end
        // nudges the loop). A successor that exists is routed to at once.
        return s.runs.get(id)?.rotating ? false : "moved";
      }
    },
    cancel: (id, reason) => cancelRouted(s, id, reason),
  };
}

/** What a rotation acts through (continuation.ts). */
export function chainDeps(s: RuntimeState): ChainDeps {
  return {
    store: s.store,
    clock: s.clock,
    maxChainHops: s.maxChainHops,
    flow: (name) => s.flows.get(name),
    startSuccessor: (flow, id, payload, accept) =>
      s.tasks.exclusive(id, () => create(s, flow, id, payload, accept)),
    cancel: (id, reason) => cancelOne(s, id, reason),
    cancelled: (id) => wasCancelled(s, id),
    report: (e) => s.report(e),
  };
}
