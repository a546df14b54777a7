/**
 * Retention and compaction in the memory store (S13, S14). Each runs whole within one call on the
 * JavaScript thread, so no other call sees an execution half deleted or a log half compacted.
 * The chain's inbox is not touched by a delete (S13): it is the chain's, not one generation's.
 */
import type { EventKind } from "../../kernel/events.ts";
import { CompactionWithoutSnapshotError } from "../../kernel/errors.ts";
import type { RetentionStore } from "../spi.ts";
import { live, type Handle } from "./data.ts";
import { lastSeq } from "./stored-event.ts";

export function memoryRetention(h: Handle): RetentionStore {
  const { data } = h;
  return {
    async deleteExecution(id) {
      live(h);
      const existed = data.events.has(id);
      data.events.delete(id);
      data.executions.delete(id);
      data.snapshots.delete(id);
      data.leases.delete(id);
      data.queues.delete(id);
      for (const [key, t] of data.timers) if (t.executionId === id) data.timers.delete(key);
      // S21: no one's fork, and no forks of its own.
      data.forks.delete(id);
      for (const [origin, forks] of data.forks) {
        const kept = forks.filter((f) => f.executionId !== id);
        if (kept.length === 0) data.forks.delete(origin);
        else if (kept.length < forks.length) data.forks.set(origin, kept);
      }
      return existed;
    },

    async compact(id, throughSeq, keepKinds: readonly EventKind[]) {
      live(h);
      const snap = data.snapshots.get(id);
      if (snap === undefined || snap.seq < throughSeq) {
        throw new CompactionWithoutSnapshotError(
          `execution "${id}" has no snapshot at or past sequence ${throughSeq}: nothing compacted`,
          { executionId: id, throughSeq, snapshotSeq: snap?.seq ?? null },
        );
      }
      const log = data.events.get(id);
      if (!log) return 0;
      // The last event stays whatever its kind: it anchors the head and the last-update time.
      const last = lastSeq(log);
      const keep = new Set<string>(keepKinds);
      const kept = log.filter((e) => e.seq > throughSeq || e.seq === last || keep.has(e.kind));
      const removed = log.length - kept.length;
      data.events.set(id, kept);
      return removed;
    },
  };
}
