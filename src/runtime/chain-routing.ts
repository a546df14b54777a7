/**
 * Chain routing (ADR 0109 D2, "Head resolution is ROUTED", and residual (0)): from any surviving
 * id of a chain to its newest verified generation in O(log n) point reads, and the generations
 * that routing reads, which retention keeps (retention.ts).
 *
 * Invariants (tests cite K5..K8; K1..K4 are continuation.ts's):
 * K5. Routing follows verified links only (C3): a generation that does not name the hop it came
 *     from, or records another owner, is never routed to.
 * K6. Routing finds the deepest generation with a log by a gallop on the fixed ladder 1, 2, 4, 8
 *     … from generation 0, then a bisection; a generation at or below the addressed one is
 *     answered "present" without a read (the addressed one exists, so the deepest is at least
 *     that). It verifies the deepest against its predecessor (once more on a failure, for a
 *     rotation racing the search), then steps at most `maxChainHops` verified links (the
 *     start-to-commit window, or the fallback walk from the addressed id when verification
 *     fails); past that it is ChainHopLimitError.
 * K7. Which generations routing probes depends on the deepest generation alone; the addressed
 *     one only spares reads. So `routeKeepSet(head)`, made by the same search, is what routing
 *     reads from ANY surviving id, and deleting generations outside it changes no routing answer.
 * K8. `liveKeepSet(head)` holds every generation at or below `head` that routing reads for any
 *     later head: what a chain that may still rotate keeps.
 */
import { successorIdOf, type ChainIdentity } from "../kernel/chain.ts";
import { ChainHopLimitError, ExecutionNotFoundError } from "../kernel/errors.ts";
import { fold } from "../fold/fold.ts";
import { chainOf, initialState, type ExecutionState } from "../fold/state.ts";
import type { Store } from "../store/spi.ts";

export interface RoutingDeps {
  store: Store;
  maxChainHops: number;
}

/** What routing knows of one generation: its chain place and owner, from its sequence 0. */
export interface Member {
  id: string;
  chain: ChainIdentity;
  principal: string | undefined;
  /** The execution that spawned the chain (issue 8), inherited by every generation. */
  parent: string | undefined;
}

/** Generation `n`'s id: the chain id itself for generation 0 (C4). */
export const generationId = (chainId: string, n: number): string =>
  n === 0 ? chainId : successorIdOf(chainId, n);

/** One point read of `id`'s sequence 0 (kept by compaction: it is a pinned kind). */
export async function memberOf(store: Store, id: string): Promise<Member | undefined> {
  const first = (await store.read(id, 0, 1))[0];
  if (!first) return undefined;
  const s = fold(initialState(id), first);
  if (s.seq !== 0) return undefined;
  return { id, chain: chainOf(s), principal: s._principal, parent: s._parent?.executionId };
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
    next.principal === prev.principal &&
    next.parent === prev.parent
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
  const at: Member = {
    id: state.executionId,
    chain: chainOf(state),
    principal: state._principal,
    parent: state._parent?.executionId,
  };
  const id = successorIdOf(at.chain.chainId, at.chain.generation + 1);
  const next = await memberOf(store, id);
  return next && isVerifiedSuccessor(at, next) ? id : undefined;
}

/**
 * K6, K7: the search for the deepest generation. It yields each generation it needs to know
 * about (is there a log?) and is sent the answer; it returns the deepest. Generations at or
 * below `known` are answered present without being yielded.
 */
function* deepestSearch(known: number): Generator<number, number, boolean> {
  let lo = 0;
  let hi = 1;
  // The gallop on the fixed ladder: afterwards the deepest is in [lo, hi).
  for (;;) {
    const present = hi <= known || (yield hi);
    if (!present) break;
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (mid <= known || (yield mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** The deepest generation of `chainId` with a log, `known` existing: O(log n) head reads. */
async function deepestGeneration(store: Store, chainId: string, known: number): Promise<number> {
  const search = deepestSearch(known);
  let step = search.next();
  while (!step.done) {
    step = search.next((await store.head(generationId(chainId, step.value))) >= 0);
  }
  return step.value;
}

/**
 * K7: the generations routing reads when `head` is a chain's deepest generation, from any
 * addressed generation: generation 0 (the chain id, the address every caller has), the
 * search's probes that have a log, and `head - 1` and `head` (the verification). Ascending.
 */
export function routeKeepSet(head: number): number[] {
  const read = new Set<number>([0]);
  const search = deepestSearch(0);
  let step = search.next();
  while (!step.done) {
    const present = step.value <= head;
    if (present) read.add(step.value);
    step = search.next(present);
  }
  if (head > 0) read.add(head - 1).add(head);
  return [...read].sort((a, b) => a - b);
}

/**
 * K8: what a chain whose head may still rotate keeps: routeKeepSet(head), every power of two up
 * to `head` (a later head's gallop), and the whole bisection range [2^k, head] of the head's top
 * power of two 2^k (a later head's bisection below it). Ascending.
 */
export function liveKeepSet(head: number): number[] {
  const keep = new Set(routeKeepSet(head));
  let top = 0;
  for (let p = 1; p <= head; p *= 2) {
    keep.add(p);
    top = p;
  }
  for (let n = top; n <= head; n++) keep.add(n);
  return [...keep].sort((a, b) => a - b);
}

/**
 * The id of the chain's newest verified generation, starting from any of its ids (K5..K7).
 * Reads are point reads: existence by head, identity by sequence 0.
 */
export async function routeToHead(deps: RoutingDeps, id: string): Promise<string> {
  const { store } = deps;
  const addressed = await memberOf(store, id);
  if (!addressed) throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
  const { chainId, generation } = addressed.chain;
  for (let attempt = 0; attempt < 2; attempt++) {
    const deepest = await deepestGeneration(store, chainId, generation);
    if (deepest === generation) return walkVerified(deps, addressed);
    const head = await memberOf(store, generationId(chainId, deepest));
    const before =
      deepest - 1 === generation
        ? addressed
        : await memberOf(store, generationId(chainId, deepest - 1));
    // The deepest must be the verified successor of the one before it, with the same owner.
    if (
      head &&
      before &&
      isVerifiedSuccessor(before, head) &&
      head.principal === addressed.principal
    ) {
      return walkVerified(deps, head);
    }
  }
  return walkVerified(deps, addressed);
}

/**
 * Steps verified links from `from` while the member is continued, or running with a started
 * successor (the start-to-commit probe), at most `maxChainHops` times (K6).
 */
async function walkVerified(deps: RoutingDeps, from: Member): Promise<string> {
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
