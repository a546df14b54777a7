/**
 * Timer rows in the memory store (S7, S15, S16). The batches that carry their events write them
 * (append.ts); this is the timer service's side: what is due, the next wake, and the moves and
 * deletes it makes of single rows. A row moved is a timer written: it wakes the fleet (S18).
 */
import type { TimerStore } from "../spi.ts";
import { live, timerKey, wake, type Handle } from "./data.ts";

export function memoryTimers(h: Handle): TimerStore {
  const { data } = h;
  return {
    async dueTimers(nowMs, limit) {
      live(h);
      return [...data.timers.values()]
        .filter((t) => t.wakeAtMs <= nowMs)
        .sort((a, b) => a.wakeAtMs - b.wakeAtMs)
        .slice(0, limit)
        .map((t) => ({ ...t }));
    },

    async nextWakeAt() {
      live(h);
      let min: number | undefined;
      for (const t of data.timers.values())
        if (min === undefined || t.wakeAtMs < min) min = t.wakeAtMs;
      return min;
    },

    async deleteTimer(id, timerId) {
      live(h);
      data.timers.delete(timerKey(id, timerId));
    },

    // S16: a row that is gone stays gone.
    async deferTimer(id, timerId, wakeAtMs) {
      live(h);
      const row = data.timers.get(timerKey(id, timerId));
      if (!row) return;
      row.wakeAtMs = wakeAtMs;
      wake(h, () => [{ kind: "timer", executionId: id, wakeAtMs }]);
    },
  };
}
