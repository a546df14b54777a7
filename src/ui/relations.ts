/**
 * The executions related to a shown one: its chain's generations (ADR 0109 D6) and its children
 * tree (issue 8), read as states through the runtime and projected by analytics/ (the same
 * projections `loom show` prints), with tighter bounds, since a page is read on every visit.
 *
 * Invariants (tests cite R1..R2):
 * R1. At most MAX_GENERATIONS states are read for a chain, walking back from the shown
 *     generation and then forward, each until a generation has no log (retention) or is not
 *     readable by an anonymous caller; `partial` says the bound cut the walk.
 * R2. At most MAX_CHILDREN states are read for the children tree.
 */
import { chainLineageOfStates } from "../analytics/chain-lineage.ts";
import { childTree, type ChildTree } from "../analytics/child-tree.ts";
import { isLoomError } from "../kernel/errors.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";
import type { Runtime } from "../runtime/runtime.ts";
import type { ChainView } from "./api-types.ts";

export type { ChainView };

export const MAX_GENERATIONS = 200;
export const MAX_CHILDREN = 200;

/** A state, or undefined when there is none or it is another principal's. */
async function stateOrNone(runtime: Runtime, id: string): Promise<ExecutionState | undefined> {
  return runtime.getState(id).catch((e: unknown) => {
    if (isLoomError(e, "LOOM_NOT_FOUND") || isLoomError(e, "LOOM_UNAUTHORIZED")) return undefined;
    throw e;
  });
}

/** The chain of `state`, when it has more than one generation (R1). */
export async function chainView(
  runtime: Runtime,
  state: ExecutionState,
): Promise<ChainView | undefined> {
  const { chainId, generation } = chainOf(state);
  if (generation === 0 && state.status !== "continued") return undefined;
  const states = new Map([[state.executionId, state]]);
  const load = async (n: number): Promise<boolean> => {
    const id = n === 0 ? chainId : `${chainId}~${n}`;
    const got = await stateOrNone(runtime, id);
    if (got) states.set(id, got);
    return got !== undefined;
  };
  let n = generation - 1;
  while (n >= 0 && states.size < MAX_GENERATIONS && (await load(n))) n--;
  const backCut = n >= 0 && states.size >= MAX_GENERATIONS;
  let m = generation + 1;
  while (states.size < MAX_GENERATIONS && (await load(m))) m++;
  const lineage = chainLineageOfStates(states, state.executionId);
  if (!lineage) return undefined;
  const view: ChainView = { ...lineage, partial: backCut || states.size >= MAX_GENERATIONS };
  const routed = await runtime.followToHead(state.executionId).catch(() => undefined);
  if (routed !== undefined) view.routedHead = routed;
  return view;
}

/** The children tree under `state` (R2). */
export async function childrenView(runtime: Runtime, state: ExecutionState): Promise<ChildTree> {
  const states = new Map([[state.executionId, state]]);
  const queue = Object.keys(state._children ?? {});
  while (queue.length > 0 && states.size < MAX_CHILDREN) {
    const id = queue.shift();
    if (id === undefined || states.has(id)) continue;
    const got = await stateOrNone(runtime, id);
    if (!got) continue;
    states.set(id, got);
    if (got._continuedTo !== undefined) queue.unshift(got._continuedTo);
    queue.push(...Object.keys(got._children ?? {}));
  }
  return childTree(states, state.executionId);
}
