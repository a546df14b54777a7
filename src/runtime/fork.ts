/**
 * `runtime.fork(id, atSequence, newId?, { budget? })`: a new execution whose log is a copy of
 * `id`'s prefix [0..atSequence], which then runs on from there (re-running what the prefix left
 * open).
 *
 * Invariants (tests cite V1..V6):
 * V1. The copy is written in one batch with the new id's lease (fence 1): a fork exists whole
 *     or not at all, and a second fork to the same id is refused (ExecutionConflictError).
 * V2. Every copied envelope carries `forkedFrom { executionId, seq }`; a fork of a chain member
 *     also `forkChain { chainId: <new id>, generation: 0 }` (ADR 0109 D7): the fork is a chain of
 *     its own. The fold keeps the carried resources (a quota is not shed by forking) and drops
 *     the chain membership, the inbox cursors and the chain deadline.
 * V3. Copied consumptions settle the fork's receives but never move its inbox: its stream is
 *     its own, from the start, so it neither reads nor moves the owner's.
 * V4. A fork point at or after EXECUTION_CONTINUED is ForkPastContinuationError (naming the
 *     successor); at or after another terminal event, InvalidInputError; a prefix [0..atSequence]
 *     that is not dense from 0 (compacted, store S14) is CompactedForkPointError. All before
 *     anything is written.
 * V5. The children the copy waits for (fold/children.ts awaitedChildren) are its origin's
 *     children, whose ends wake the origin only: the copy's batch writes a watch row for each
 *     (fold/index-changes.ts W3), so the fork's waits on them settle when they end.
 * V6. A fork starts from what its prefix spent (V2). Given a budget of its own (checked by
 *     checkedBudget), it may only narrow its origin's budget at the fork point: a limit it would
 *     raise or leave out is InvalidInputError naming the dimension, before anything is written;
 *     a dimension the origin does not limit may be added. The budget is `meta.forkBudget` on the
 *     last copied envelope, in the V1 batch, and the fold narrows `_budget` to it there (fold
 *     F11): the fork has its budget less what the prefix spent.
 * V7. A fork has its own clock base (issue 21): the moment it is forked is `meta.forkedAt` on the
 *     same envelope, and its deadline and the timeouts of the steps its prefix left running count
 *     from it (fold F12), unless it is forked with `{ keepDeadline: true }`.
 */
import {
  CompactedForkPointError,
  ExecutionConflictError,
  ExecutionNotFoundError,
  ForkPastContinuationError,
  InvalidInputError,
  SequenceConflictError,
} from "../kernel/errors.ts";
import { isTerminalEvent, type Envelope } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import { loosenedLimit, type Budget } from "../kernel/resources.ts";
import { fold } from "../fold/fold.ts";
import { indexChanges, watchWakeId, type IndexChanges } from "../fold/index-changes.ts";
import { initialState, type ExecutionState } from "../fold/state.ts";
import { awaitedChildren } from "../fold/children.ts";
import { atForkPoint } from "../fold/fork-point.ts";
import { queueOfBatch } from "../fold/queue.ts";
import type { Clock } from "../kernel/clock.ts";
import type { Store } from "../store/spi.ts";
import { spentOf } from "../store/spent.ts";
import type { Journal } from "./journal.ts";

export interface ForkDeps {
  store: Store;
  journal: Journal;
  clock: Clock;
  ownerId: string;
  leaseTtlMs: number;
}

/**
 * Writes the fork (V1..V6) and returns its state and fence (1), holding its lease. `budget` is
 * the fork's own, already checked by checkedBudget.
 */
export async function writeFork(
  deps: ForkDeps,
  id: string,
  atSequence: number,
  newId: string,
  budget?: Budget,
  options: { keepDeadline?: boolean } = {},
): Promise<ExecutionState> {
  const { first, prefix } = await forkablePrefix(deps.store, id, atSequence);
  // V2: every copied envelope names its origin; a chain member's copy is a chain of its own.
  const member = fold(initialState(id), first)._chain !== undefined;
  const forkedFrom: Json = { executionId: id, seq: atSequence };
  const events: Envelope[] = prefix.map((e) => ({
    executionId: newId,
    seq: e.seq,
    kind: e.kind,
    at: e.at,
    payload: e.payload,
    meta: {
      ...(e.meta?.kernel === true ? { kernel: true as const } : {}),
      fence: 1,
      forkedFrom,
      ...(member ? { forkChain: { chainId: newId, generation: 0 } } : {}),
    },
  }));
  const state = initialState(newId);
  for (const e of events) fold(state, e);
  const last = events[events.length - 1];
  if (last !== undefined && (budget !== undefined || !options.keepDeadline)) {
    // V6: checked against the origin's budget at the fork point, then stamped where the fold
    // applies it (after the prefix's own negotiated grants). V7: the fork's clock base.
    if (budget !== undefined) refuseLoosened(state._budget, budget, { id, atSequence, newId });
    last.meta = {
      ...last.meta,
      ...(budget === undefined ? {} : { forkBudget: budget as unknown as Json }),
      ...(options.keepDeadline ? {} : { forkedAt: deps.clock.now() }),
    };
    atForkPoint(state, last);
  }
  // V1: one batch, with the new id's lease (fence 1): the fork exists whole or not at all.
  const spent = spentOf(state._resources);
  // V8: in the origin's queue, without its dedupe key.
  const queue = queueOfBatch(events, state);
  if (queue !== undefined) delete queue.dedupe;
  try {
    await deps.journal.append({
      executionId: newId,
      events,
      expectedSeq: 0,
      fence: 1,
      status: state.status,
      flow: state.flow,
      index: withWatches(indexChanges(events), state, deps.clock.now()),
      claimLease: { owner: deps.ownerId, expiresAtMs: deps.clock.now() + deps.leaseTtlMs },
      ...(state._principal === undefined ? {} : { principal: state._principal }),
      ...(spent === undefined ? {} : { spent }),
      ...(state._subject === undefined ? {} : { subject: state._subject }),
      // Its queue's columns (V8).
      ...(queue === undefined ? {} : { queue }),
    });
  } catch (e) {
    if (e instanceof SequenceConflictError || (e instanceof Error && /fence/i.test(e.message))) {
      throw new ExecutionConflictError(
        `execution "${newId}" already exists: a fork needs a new id`,
        {
          executionId: newId,
        },
      );
    }
    throw e;
  }
  return state;
}

/**
 * V4: the prefix [0..atSequence] of `id`'s log a fork copies, and its first event; refused
 * before anything is written when the point is not one a fork may start from.
 */
async function forkablePrefix(
  store: Store,
  id: string,
  atSequence: number,
): Promise<{ first: Envelope; prefix: Envelope[] }> {
  if (!Number.isSafeInteger(atSequence) || atSequence < 0) {
    throw new InvalidInputError(
      `a fork point is a sequence number >= 0, got ${String(atSequence)}`,
    );
  }
  const read = await store.read(id, 0, atSequence + 1);
  if (read.length === 0) throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
  // V4: a compacted log has a gap (store S14): only a prefix dense from 0 is the fork's history.
  // One shorter than the fork point while the log goes on past it lost its end to a compaction.
  const prefix = read.filter((e) => e.seq <= atSequence);
  const cut = prefix.length < atSequence + 1 && read.length > prefix.length;
  const first = prefix[0];
  if (first === undefined || cut || prefix.some((e, i) => e.seq !== i)) {
    throw new CompactedForkPointError(
      `execution "${id}" no longer has its prefix [0..${atSequence}] (compacted): it cannot be forked there`,
      { executionId: id, atSequence },
    );
  }
  if (prefix.length < atSequence + 1) {
    throw new InvalidInputError(
      `execution "${id}" has ${prefix.length} events; a fork point must be one of them`,
    );
  }
  const ended = prefix.find((e) => isTerminalEvent(e));
  if (ended?.kind === "EXECUTION_CONTINUED") {
    const successor = (ended.payload as { successorId?: unknown } | null)?.successorId;
    throw new ForkPastContinuationError(
      `sequence ${atSequence} of "${id}" is at or after its EXECUTION_CONTINUED: fork its successor ${JSON.stringify(successor)} instead`,
      { executionId: id, successorId: typeof successor === "string" ? successor : null },
    );
  }
  if (ended) {
    throw new InvalidInputError(
      `sequence ${atSequence} of "${id}" is at or after its end (${ended.kind}): fork an earlier point`,
    );
  }
  return { first, prefix };
}

/** V6: a fork budget that would raise or leave out one of its origin's limits is refused. */
function refuseLoosened(
  origin: Budget | undefined,
  budget: Budget,
  at: { id: string; atSequence: number; newId: string },
): void {
  const loosened = loosenedLimit(origin, budget);
  if (!loosened) return;
  const { dimension, limit, asked } = loosened;
  const what = asked === undefined ? `leaves out ${dimension}` : `raises ${dimension} to ${asked}`;
  throw new InvalidInputError(
    `the budget of fork "${at.newId}" ${what}: "${at.id}" limits ${dimension} to ${limit} at sequence ${at.atSequence}, and a fork may only narrow its origin's budget`,
    { executionId: at.id, atSequence: at.atSequence, dimension, limit },
  );
}

/** V5: the copy's watch rows, one per child it waits for, due at once. */
function withWatches(
  index: IndexChanges | undefined,
  state: ExecutionState,
  now: number,
): IndexChanges | undefined {
  const open = awaitedChildren(state);
  if (open.size === 0) return index;
  const out = index ?? { timersSet: [], timersCleared: [], clearAllTimers: false };
  for (const childId of open) out.timersSet.push({ timerId: watchWakeId(childId), wakeAtMs: now });
  return out;
}
