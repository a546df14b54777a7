/**
 * Timer rows on SQLite (S7, S15, S16). The batches that carry their events write them
 * (append.ts); this is the timer service's side: what is due, the next wake, and the moves and
 * deletes it makes of single rows. A move is an UPDATE, so a row deleted meanwhile stays deleted.
 */
import type { DueTimer, TimerStore } from "../spi.ts";
import type { Statements } from "./statements.ts";

export function sqliteTimers(q: Statements): TimerStore {
  return {
    async dueTimers(nowMs, limit): Promise<DueTimer[]> {
      return q.due.all(nowMs, limit).map((r) => ({
        executionId: r.execution_id,
        timerId: r.timer_id,
        wakeAtMs: r.wake_at,
      }));
    },

    async nextWakeAt() {
      return q.nextWake.get()?.w ?? undefined;
    },

    async deleteTimer(id, timerId) {
      q.clearTimer.run(id, timerId);
    },

    async deferTimer(id, timerId, wakeAtMs) {
      q.deferTimer.run(wakeAtMs, id, timerId);
    },
  };
}
