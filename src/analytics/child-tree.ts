/**
 * An execution's children as a tree (issue 8): a pure projection of folded states, as the
 * parent's `_children` and each child's `_parent` record them. A continued child is shown by its
 * chain's newest generation present (D6: `continued` is "look at the head").
 */
import type { ExecutionStatus } from "../kernel/events.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";

export interface ChildNode {
  /** The id the parent spawned (the child chain's id). */
  executionId: string;
  flow: string;
  detached: boolean;
  /** The status of the chain's newest generation present; undefined when no state is present. */
  status: ExecutionStatus | undefined;
  /** That generation's id, when the child continued. */
  head?: string;
  children: ChildNode[];
}

export interface ChildTree {
  executionId: string;
  /** Who spawned it, when it is a child itself. */
  parent?: string;
  children: ChildNode[];
}

/** How deep the tree is followed (a guard against a cycle in hand-made states). */
const MAX_DEPTH = 32;

/** The tree under `id`, from the states present (children without one show no status). */
export function childTree(states: ReadonlyMap<string, ExecutionState>, id: string): ChildTree {
  const root = states.get(id);
  const tree: ChildTree = { executionId: id, children: nodesOf(states, root, 0) };
  if (root?._parent) tree.parent = root._parent.executionId;
  return tree;
}

function nodesOf(
  states: ReadonlyMap<string, ExecutionState>,
  parent: ExecutionState | undefined,
  depth: number,
): ChildNode[] {
  if (!parent || depth >= MAX_DEPTH) return [];
  const nodes: ChildNode[] = [];
  for (const [childId, record] of Object.entries(parent._children ?? {})) {
    if (record.callId === "") continue; // an earlier generation's child, known by its outcome
    const head = headOf(states, childId);
    const node: ChildNode = {
      executionId: childId,
      flow: record.flow,
      detached: record.detached,
      status: head?.status,
      children: nodesOf(states, head, depth + 1),
    };
    if (head && head.executionId !== childId) node.head = head.executionId;
    nodes.push(node);
  }
  return nodes;
}

/** The newest generation of `chainId` present in `states`. */
function headOf(
  states: ReadonlyMap<string, ExecutionState>,
  chainId: string,
): ExecutionState | undefined {
  let at = states.get(chainId);
  while (at?._continuedTo !== undefined) {
    const next = states.get(at._continuedTo);
    if (!next || chainOf(next).chainId !== chainId) break;
    at = next;
  }
  return at;
}
