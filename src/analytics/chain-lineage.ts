/**
 * Chain lineage (ADR 0109 D6): the generations of a chain as a pure projection over logs. Chain
 * identity is read through the fold's rules (a generation's sequence 0 must be the verified
 * shape `<chainId>~<n>` naming its predecessor), so a log that merely claims a chain is not in
 * it, and a fork is a chain of its own.
 *
 * `chainLineage` folds whole logs, so it needs them dense from 0: a fold stops at a compacted
 * log's gap (compaction.ts P3). For compacted generations pass their states, loaded as snapshot
 * plus tail, to `chainLineageOfStates`.
 */
import type { Envelope, ExecutionStatus } from "../kernel/events.ts";
import { foldAll } from "../fold/fold.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";

export interface Generation {
  executionId: string;
  generation: number;
  status: ExecutionStatus;
  startedAt: number;
  /** The successor its EXECUTION_CONTINUED named. */
  continuedTo?: string;
}

export interface ChainLineage {
  chainId: string;
  /** Oldest first, each the verified successor of the one before. */
  generations: Generation[];
  /** The newest generation: the one the chain is addressed at. */
  head: string;
}

/**
 * The lineage of the chain `id` belongs to, from `events`: the whole logs of any number of
 * executions, mixed. Generations whose logs are not in `events` end the walk (retention).
 */
export function chainLineage(events: readonly Envelope[], id: string): ChainLineage | undefined {
  const logs = new Map<string, Envelope[]>();
  for (const e of events) {
    const log = logs.get(e.executionId);
    if (log) log.push(e);
    else logs.set(e.executionId, [e]);
  }
  const states = new Map<string, ExecutionState>();
  for (const [x, log] of logs) states.set(x, foldAll([...log].sort((a, b) => a.seq - b.seq)));
  return chainLineageOfStates(states, id);
}

/**
 * The lineage of the chain `id` belongs to, from folded states by execution id (each loaded as
 * snapshot plus tail, so a compacted generation counts). A generation with no state ends the
 * walk (retention).
 */
export function chainLineageOfStates(
  states: ReadonlyMap<string, ExecutionState>,
  id: string,
): ChainLineage | undefined {
  const stateOf = (x: string): ExecutionState | undefined => states.get(x);
  const addressed = stateOf(id);
  if (!addressed || addressed.seq < 0) return undefined;
  const { chainId } = chainOf(addressed);
  // Walk back to the oldest member present, then forward through verified links.
  let first = addressed;
  for (;;) {
    const from = first._chain?.continuedFrom?.executionId;
    const before = from === undefined ? undefined : stateOf(from);
    if (!before || chainOf(before).chainId !== chainId) break;
    first = before;
  }
  const generations: Generation[] = [];
  for (let at: ExecutionState | undefined = first; at;) {
    const g: Generation = {
      executionId: at.executionId,
      generation: chainOf(at).generation,
      status: at.status,
      startedAt: at.startedAt,
    };
    if (at._continuedTo !== undefined) g.continuedTo = at._continuedTo;
    generations.push(g);
    const nextId = `${chainId}~${g.generation + 1}`;
    const next = stateOf(nextId);
    at = next?._chain?.continuedFrom?.executionId === at.executionId ? next : undefined;
  }
  const last = generations[generations.length - 1];
  return { chainId, generations, head: last?.executionId ?? id };
}
