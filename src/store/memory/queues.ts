/**
 * Queues in the memory store (S26..S29). An admission runs whole within one call on the
 * JavaScript thread, as every write of the memory store does, so it is the one serialized step
 * per queue that S26 asks for: no other handle's call interleaves with its count and its leases.
 * Each call reads the executions of the store (a test and simulation store: no index is kept).
 */
import type { ExecutionSummary, Lease, QueueEntry, QueueStore, QueuedExecution } from "../spi.ts";
import {
  admissionOrder,
  checkAdmit,
  isActive,
  isWaiting,
  leaseLive,
  pickAdmitted,
  type ActiveCount,
} from "../queue-admit.ts";
import { live, type Data, type Handle } from "./data.ts";

/** The executions of `queue` with their rows and leases. */
function* membersOf(data: Data, queue: string) {
  for (const [id, entry] of data.queues) {
    if (entry.name !== queue) continue;
    const row = data.executions.get(id);
    if (row) yield { id, entry, row, lease: data.leases.get(id) };
  }
}

/** QA3: the queue's active executions, in all and by key, at nowMs. */
function activeOf(data: Data, queue: string, nowMs: number): ActiveCount {
  const count: ActiveCount = { active: 0, byKey: new Map() };
  for (const { entry, row, lease } of membersOf(data, queue)) {
    if (!isActive(row.status, leaseLive(lease, nowMs))) continue;
    count.active += 1;
    if (entry.key !== undefined) count.byKey.set(entry.key, (count.byKey.get(entry.key) ?? 0) + 1);
  }
  return count;
}

const queued = (id: string, entry: QueueEntry, row: ExecutionSummary): QueuedExecution => ({
  executionId: id,
  flow: row.flow,
  ...(entry.key === undefined ? {} : { key: entry.key }),
  priority: entry.priority,
  createdAtMs: row.createdAtMs,
  ...(entry.notBeforeMs === undefined ? {} : { notBeforeMs: entry.notBeforeMs }),
});

/** The queue's waiting executions at nowMs, in admission order. */
function waitingOf(data: Data, queue: string, nowMs: number): QueuedExecution[] {
  const waiting: QueuedExecution[] = [];
  for (const { id, entry, row, lease } of membersOf(data, queue)) {
    if (isWaiting(row.status, leaseLive(lease, nowMs))) waiting.push(queued(id, entry, row));
  }
  return waiting.sort(admissionOrder);
}

export function memoryQueues(h: Handle): QueueStore {
  const { data } = h;
  return {
    async admitQueued(owner, opts) {
      live(h);
      checkAdmit(owner, opts);
      const { queue, nowMs, ttlMs } = opts;
      const flows = new Set(opts.flows);
      const admissible = waitingOf(data, queue, nowMs).filter(
        (w) => flows.has(w.flow) && (w.notBeforeMs === undefined || w.notBeforeMs <= nowMs),
      );
      return pickAdmitted(admissible, activeOf(data, queue, nowMs), opts).map((w) => {
        const id = w.executionId;
        const lease: Lease = {
          executionId: id,
          owner,
          fence: (data.leases.get(id)?.fence ?? 0) + 1,
          expiresAtMs: nowMs + ttlMs,
        };
        data.leases.set(id, lease);
        return { executionId: id, fence: lease.fence, expiresAtMs: lease.expiresAtMs };
      });
    },

    async queueView(queue, { nowMs, limit }) {
      live(h);
      const count = activeOf(data, queue, nowMs);
      const waiting = waitingOf(data, queue, nowMs);
      return {
        queue,
        active: count.active,
        activeByKey: Object.fromEntries(count.byKey),
        waiting: waiting.slice(0, Math.max(0, limit)),
        waitingCount: waiting.length,
      };
    },

    async queueNames() {
      live(h);
      const names = new Set<string>();
      for (const [id, entry] of data.queues) {
        if (data.executions.get(id)?.status === "queued") names.add(entry.name);
      }
      return [...names].sort();
    },
  };
}
