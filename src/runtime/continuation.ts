/**
 * `ctx.continueAsNew` (ADR 0109): the rotation of a generation into its successor, and the
 * routing that keeps a chain addressable by any of its ids.
 *
 * Invariants (tests cite K1..K6):
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
 * K5. Routing follows verified links only (C3): a generation that does not name the hop it came
 *     from, or records another owner, is never routed to.
 * K6. Routing gallops and bisects over `<chainId>~<n>` (O(log n) point reads), verifies the
 *     deepest against its predecessor, then steps at most `maxChainHops` verified links (the
 *     start-to-commit window, or the fallback walk); past that it is ChainHopLimitError.
 */
import type { Clock } from "../kernel/clock.ts";
import { successorIdOf, type Carried, type ChainIdentity } from "../kernel/chain.ts";
import {
  ChainHopLimitError,
  ContinuationConflictError,
  ExecutionNotFoundError,
  errorToData,
} from "../kernel/errors.ts";
import { EVENT_SCHEMA_VERSION } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import { fold } from "../fold/fold.ts";
import { chainOf, initialState, type ExecutionState } from "../fold/state.ts";
import type { Store } from "../store/spi.ts";
import type { Flow } from "./flow.ts";
import type { Run } from "./run.ts";

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

/** What routing knows of one generation: its chain place and owner, from its sequence 0. */
interface Member {
  id: string;
  chain: ChainIdentity;
  principal: string | undefined;
}

async function memberOf(store: Store, id: string): Promise<Member | undefined> {
  const first = (await store.read(id, 0, 1))[0];
  if (!first) return undefined;
  const s = fold(initialState(id), first);
  if (s.seq !== 0) return undefined;
  return { id, chain: chainOf(s), principal: s._principal };
}

/** K5 / C3: `next` is the verified successor of `prev`. */
export function isVerifiedSuccessor(prev: Member, next: Member): boolean {
  const from = next.chain.continuedFrom;
  return (
    from !== undefined &&
    from.executionId === prev.id &&
    next.chain.chainId === prev.chain.chainId &&
    next.chain.generation === prev.chain.generation + 1 &&
    next.id === successorIdOf(prev.chain.chainId, next.chain.generation) &&
    next.principal === prev.principal
  );
}

/**
 * The id of `state`'s verified successor (C3) when it already has a log: a rotation started
 * and not committed, or committed. One point read.
 */
export async function startedSuccessor(
  store: Store,
  state: ExecutionState,
): Promise<string | undefined> {
  const at: Member = { id: state.executionId, chain: chainOf(state), principal: state._principal };
  const id = successorIdOf(at.chain.chainId, at.chain.generation + 1);
  const next = await memberOf(store, id);
  return next && isVerifiedSuccessor(at, next) ? id : undefined;
}

const genId = (chainId: string, n: number) => (n === 0 ? chainId : successorIdOf(chainId, n));

/**
 * The id of the chain's newest verified generation, starting from any of its ids (K5, K6).
 * Reads are point reads: existence by head, identity by sequence 0.
 */
export async function routeToHead(
  deps: Pick<ChainDeps, "store" | "maxChainHops">,
  id: string,
): Promise<string> {
  const { store } = deps;
  const addressed = await memberOf(store, id);
  if (!addressed) throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
  const { chainId, generation } = addressed.chain;
  const exists = async (n: number) => (await store.head(genId(chainId, n))) >= 0;
  // Gallop, then bisect, for the deepest generation with a log.
  let lo = generation;
  let step = 1;
  while (await exists(lo + step)) {
    lo += step;
    step *= 2;
  }
  let hi = lo + step;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await exists(mid)) lo = mid;
    else hi = mid;
  }
  let start = addressed;
  if (lo > generation) {
    const deepest = await memberOf(store, genId(chainId, lo));
    const before =
      lo - 1 === generation ? addressed : await memberOf(store, genId(chainId, lo - 1));
    // The deepest must be the verified successor of the one before it, with the same owner.
    if (
      deepest &&
      before &&
      isVerifiedSuccessor(before, deepest) &&
      deepest.principal === addressed.principal
    ) {
      start = deepest;
    }
  }
  return walkVerified(deps, start);
}

/**
 * Steps verified links from `from` while the member is continued, or running with a started
 * successor (the start-to-commit probe), at most `maxChainHops` times (K6).
 */
async function walkVerified(
  deps: Pick<ChainDeps, "store" | "maxChainHops">,
  from: Member,
): Promise<string> {
  let at = from;
  for (let hops = 0; ; hops++) {
    const nextId = successorIdOf(at.chain.chainId, at.chain.generation + 1);
    const next = await memberOf(deps.store, nextId);
    if (!next || !isVerifiedSuccessor(at, next)) return at.id;
    if (hops >= deps.maxChainHops) {
      throw new ChainHopLimitError(
        `following the chain of "${from.id}" took more than ${deps.maxChainHops} steps; the furthest verified generation reached is "${at.id}"`,
        { from: from.id, furthest: at.id, maxChainHops: deps.maxChainHops },
      );
    }
    at = next;
  }
}
