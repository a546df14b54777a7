/**
 * The memory store's fleet side (`memoryStore({ fleet: true })`): claims (S17) and wakes (S18)
 * among the handles over one store's data (`reopen()`), each of which stands for a process of a
 * fleet. It lets the simulator and the tests run a fleet's code paths without PostgreSQL.
 *
 * F1. A claim runs whole within one call on the JavaScript thread, as every write of the memory
 *     store does, so no other handle's call interleaves with it: of concurrent claimers each
 *     execution goes to one, and a lease taken or an execution ended before the claim is not
 *     claimed. Candidates are taken in id order (PostgreSQL's claim takes expired leases first,
 *     oldest expiry first, then released ones in id order: with a limit it may pick others of
 *     the same set, which is what the conformance suite checks).
 * F2. A wake is sent only for what committed: `appendMany` collects its batches' wakes as they
 *     apply and sends them once the whole call committed (none for a refused batch or a call
 *     rolled back). Wakes are delivered on a microtask after the call, in commit order, to every
 *     subscriber of every open handle over the data, each subscriber on its own (one that throws
 *     does not keep the others from hearing).
 * F3. Closing a handle ends its subscriptions (PostgreSQL's store stops listening on close).
 */
import { checkClaim } from "../append-check.ts";
import { isTerminalStatus, type ExecutionStatus } from "../../kernel/events.ts";
import type { AppendBatch, ExecutionSummary, FleetStore, FleetWake, Lease } from "../spi.ts";

/** Every subscription to any handle over one store's data. */
export type Subscribers = Set<(wake: FleetWake) => void>;

/** Whether an execution with this status may be claimed, or wakes the fleet when left unleased. */
const runnable = (status: ExecutionStatus | undefined) =>
  status === "pending" || status === "running";

/**
 * S17, F1: takes the leases of up to `limit` runnable executions of `flows` (pending or running,
 * with a lease row that is released or expired at `nowMs`), in id order; returns copies.
 */
export function claimRunnable(
  executions: ReadonlyMap<string, ExecutionSummary>,
  leases: ReadonlyMap<string, Lease>,
  owner: string,
  opts: Parameters<FleetStore["claimRunnable"]>[1],
): Lease[] {
  checkClaim(opts);
  const { flows, limit, ttlMs, nowMs } = opts;
  if (flows.length === 0 || limit === 0) return [];
  const named = new Set(flows);
  const claimed: Lease[] = [];
  for (const id of [...executions.keys()].sort()) {
    if (claimed.length >= limit) break;
    const x = executions.get(id) as ExecutionSummary;
    const lease = leases.get(id);
    // An execution always has a lease row from its first append (S3); none: not claimable.
    if (!lease || !runnable(x.status) || !named.has(x.flow)) continue;
    if (lease.owner !== undefined && lease.expiresAtMs > nowMs) continue;
    lease.owner = owner;
    lease.fence += 1;
    lease.expiresAtMs = nowMs + ttlMs;
    claimed.push({ ...lease });
  }
  return claimed;
}

/**
 * S18: what an appended batch wakes, judged on the store after it applied: the notice's owner,
 * every timer row it set (other executions' wake rows first, as PostgreSQL's routine writes
 * them), and its execution when it is left pending or running with no lease held.
 */
export function batchWakes(
  b: AppendBatch,
  leaseOwner: string | undefined,
  queue: string | undefined,
): FleetWake[] {
  const wakes: FleetWake[] = [];
  if (b.notice) {
    wakes.push({ kind: "notice", owner: b.notice.owner, executionId: b.executionId });
  }
  const ix = b.index;
  for (const w of ix?.wakes ?? []) {
    wakes.push({ kind: "timer", executionId: w.executionId, wakeAtMs: w.wakeAtMs });
  }
  // A terminal batch sets none of its own rows (it clears them): as the store applies it.
  if (ix && !ix.clearAllTimers) {
    for (const t of ix.timersSet) {
      wakes.push({ kind: "timer", executionId: b.executionId, wakeAtMs: t.wakeAtMs });
    }
  }
  if (runnable(b.status) && leaseOwner === undefined) {
    wakes.push({ kind: "runnable", executionId: b.executionId });
  }
  // S26: a queue may admit once an execution is recorded in it, ends, or lets its lease go.
  const recorded = b.queue !== undefined && b.expectedSeq === 0;
  const freed = isTerminalStatus(b.status) || b.releaseLease !== undefined;
  if (queue !== undefined && (recorded || freed)) wakes.push({ kind: "queue", queue });
  return wakes;
}

/**
 * S18: a lease released while its execution is pending or running makes it runnable; one of a
 * queue's executions may free a slot of the queue.
 */
export function releaseWakes(
  id: string,
  status: ExecutionStatus | undefined,
  queue: string | undefined,
): FleetWake[] {
  const wakes: FleetWake[] = runnable(status) ? [{ kind: "runnable", executionId: id }] : [];
  if (queue !== undefined) wakes.push({ kind: "queue", queue });
  return wakes;
}

/** F2: sends `wakes` to every subscriber on a microtask, after the call that committed them. */
export function send(subscribers: Subscribers, wakes: readonly FleetWake[]): void {
  if (wakes.length === 0 || subscribers.size === 0) return;
  const to = [...subscribers];
  queueMicrotask(() => {
    for (const wake of wakes) {
      for (const onWake of to) {
        // Unsubscribed meanwhile: it hears nothing more.
        if (!subscribers.has(onWake)) continue;
        try {
          onWake({ ...wake });
        } catch {
          // A subscriber's failure is its own (F2).
        }
      }
    }
  });
}

/**
 * Subscribes `onWake` (S18) for one handle: `own` holds that handle's subscriptions, which its
 * close ends (F3). Returns the function that unsubscribes (a second call does nothing).
 */
export function subscribe(
  subscribers: Subscribers,
  own: Subscribers,
  onWake: (wake: FleetWake) => void,
): () => Promise<void> {
  // A function of its own, so one callback subscribed twice is two subscriptions.
  const subscriber = (wake: FleetWake) => onWake(wake);
  subscribers.add(subscriber);
  own.add(subscriber);
  return async () => {
    subscribers.delete(subscriber);
    own.delete(subscriber);
  };
}
