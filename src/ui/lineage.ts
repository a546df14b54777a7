/**
 * Where an execution came from and what it led to (api-types.ts Lineage): its fork origin, the
 * forks made of it, the generations before and after it in its chain, and its parent. Read from
 * its folded state and the store's fork rows, so every link the page shows is one the log records.
 *
 * Invariants (tests cite G1..G2):
 * G1. `forkedFrom`, `continuedFrom`, `continuedTo` and `parent` are the state's own records
 *     (fold F12, the chain's EXECUTION_STARTED and EXECUTION_CONTINUED, schema 1.7.0's parent).
 * G2. `forks` lists the executions forked from this one (oldest first), each with its fork point:
 *     the store's rows of them (`runtime.forksOf`, store S21), read as `caller`, at most
 *     MAX_FORKS_SHOWN. A fork deleted since (retention) is not listed.
 */
import type { ExecutionState } from "../fold/state.ts";
import type { CallerOptions, Runtime } from "../runtime/runtime.ts";
import type { Lineage } from "./api-types.ts";

/** G2: the forks a page lists at most. */
export const MAX_FORKS_SHOWN = 100;

export async function lineageOf(
  runtime: Runtime,
  state: ExecutionState,
  caller: CallerOptions = {},
): Promise<Lineage> {
  const forks = await runtime.forksOf(state.executionId, { ...caller, limit: MAX_FORKS_SHOWN });
  const lineage: Lineage = { forks };
  if (state._forkedFrom !== undefined) lineage.forkedFrom = { ...state._forkedFrom };
  const from = state._chain?.continuedFrom?.executionId;
  if (from !== undefined) lineage.continuedFrom = from;
  if (state._continuedTo !== undefined) lineage.continuedTo = state._continuedTo;
  if (state._parent !== undefined) lineage.parent = state._parent.executionId;
  return lineage;
}
