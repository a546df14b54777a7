/**
 * What a cancel writes (K8.2, ADR 0020 A2, A6), in one batch under the canceller's fence:
 *
 * - for each step still running, `RESOURCE_METERED` with at least its wall time since it first
 *   started (marked as an estimate: the owner's own figures are out of reach), then
 *   `STEP_CANCELLED`; so "start an expensive call, cancel, repeat" cannot evade a budget;
 * - `EXECUTION_CANCELLED { reason, error }`, kernel-stamped: the terminal fact.
 *
 * The canceller takes the lease first (fence, then cancel): an owner that is still running, or a
 * paused zombie, is refused (FencedError) whatever it appends after, so its late
 * `STEP_COMPLETED` never lands after the cancel, and exactly one terminal event is written.
 */
import type { Clock } from "../kernel/clock.ts";
import {
  ExecutionNotFoundError,
  FencedError,
  InvalidInputError,
  LeaseHeldError,
} from "../kernel/errors.ts";
import { isTerminalStatus } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import type { AppendBatch, Store } from "../store/spi.ts";
import type { Journal } from "./journal.ts";
import type { Leases } from "./leases.ts";
import { appendSpecs, mustLoad } from "./load-state.ts";
import type { Run } from "./run.ts";
import { cancelSpecs } from "./cancel-specs.ts";

export { cancelSpecs } from "./cancel-specs.ts";

export const MAX_REASON_LENGTH = 1000;

export interface CancelDeps {
  store: Store;
  journal: Journal;
  clock: Clock;
  leases: Leases;
  ownerId: string;
  /** The run this runtime holds for `id`, if any. */
  run(id: string): Run | undefined;
  /** Drops a cached, parked run: the cancel makes its body stale. */
  drop(run: Run): void;
}

/**
 * Cancels `id`: true when this call ended it, false when it had already ended (a cancel racing a
 * completion: whichever terminal fact committed first stands, and there is one).
 */
export async function cancelExecution(
  deps: CancelDeps,
  id: string,
  reason: Json,
): Promise<boolean> {
  const run = deps.run(id);
  if (run?.phase === "active" && isTerminalStatus(run.state.status)) {
    // Its terminal event is queued: the execution ends, unless that append is refused (its
    // lease was taken over), and then the cancel goes on through the store.
    if (await run.done.then(yes, no)) return false;
  }
  if (run?.phase === "active") {
    // This runtime drives it: the run's own journal order is the fence, and ending the run
    // aborts its in-flight effects (Run.terminate).
    try {
      await run.enqueue(
        cancelSpecs(run.state, reason, deps.clock.now(), undefined, (id) => run.provisional(id)),
      );
      return true;
    } catch (e) {
      // Another owner took the execution over meanwhile: cancel it through the store.
      if (!(e instanceof FencedError)) throw e;
    }
  } else if (run) {
    deps.drop(run);
  }
  if ((await deps.store.head(id)) < 0) {
    throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
  }
  for (let attempt = 1; ; attempt++) {
    // Fence first (A6): take the lease from whoever holds it.
    const current = await deps.store.getLease(id);
    const held = current?.owner !== undefined && current.expiresAtMs > deps.clock.now();
    // An owner whose lease expired may still be running (a paused event loop): tell it too.
    const holder = current?.owner;
    const lease = await deps.leases.acquire(id, held ? current?.fence : undefined);
    if (!lease) {
      // Someone took the lease between the read and the take: read it again.
      if (attempt < 5) continue;
      throw new LeaseHeldError(`execution "${id}": its lease kept changing hands; try again`);
    }
    let appended = false;
    try {
      const state = await mustLoad(deps.store, id);
      if (isTerminalStatus(state.status)) return false;
      const notice: AppendBatch["notice"] =
        holder !== undefined && holder !== deps.ownerId
          ? { owner: holder, kind: "cancel" }
          : undefined;
      await appendSpecs(
        deps.journal,
        deps.clock,
        state,
        lease.fence,
        cancelSpecs(state, reason, deps.clock.now()),
        notice ? { releaseLease: deps.ownerId, notice } : { releaseLease: deps.ownerId },
      );
      appended = true;
      return true;
    } finally {
      if (!appended) await deps.leases.release(id, lease.fence);
    }
  }
}

const yes = () => true;
const no = () => false;

/** A cancel reason: text of at most MAX_REASON_LENGTH characters (default "cancelled"). */
export function checkedReason(reason: unknown): string {
  if (reason === undefined) return "cancelled";
  if (typeof reason !== "string" || reason.length === 0 || reason.length > MAX_REASON_LENGTH) {
    throw new InvalidInputError(
      `a cancel reason must be a string of 1 to ${MAX_REASON_LENGTH} characters`,
    );
  }
  return reason;
}
