/**
 * Timer rows on PostgreSQL (S7, S15, S16). The batches that carry their events write them
 * (append.ts); this is the timer service's side: what is due, the next wake, and the moves and
 * deletes it makes of single rows.
 */
import type pg from "pg";
import type { TimerStore } from "../spi.ts";
import { run, statement, type Tables } from "./db.ts";
import { wakeText } from "./wakes.ts";

interface TimerRow {
  execution_id: string;
  timer_id: string;
  wake_at: number;
}

export function postgresTimers(pool: pg.Pool, t: Tables, channel: string): TimerStore {
  const s = {
    due: statement(
      "due_timers",
      `SELECT execution_id, timer_id, wake_at FROM ${t.timers} WHERE wake_at <= $1
       ORDER BY wake_at, execution_id, timer_id LIMIT $2`,
    ),
    next: statement("next_wake", `SELECT MIN(wake_at) AS wake_at FROM ${t.timers}`),
    delete: statement(
      "delete_timer",
      `DELETE FROM ${t.timers} WHERE execution_id = $1 AND timer_id = $2`,
    ),
    // S16: an UPDATE, so a row deleted meanwhile stays deleted; a row moved is a timer written
    // (S18), so it wakes the fleet.
    defer: statement(
      "defer_timer",
      `WITH moved AS (
         UPDATE ${t.timers} SET wake_at = $3 WHERE execution_id = $1 AND timer_id = $2
         RETURNING 1
       )
       SELECT pg_notify($4, $5) FROM moved WHERE $5::text IS NOT NULL`,
    ),
  };

  return {
    async dueTimers(nowMs, limit) {
      const { rows } = await run<TimerRow>(pool, s.due([nowMs, Math.max(0, Math.floor(limit))]));
      return rows.map((r) => ({
        executionId: r.execution_id,
        timerId: r.timer_id,
        wakeAtMs: r.wake_at,
      }));
    },

    async nextWakeAt() {
      const { rows } = await run<{ wake_at: number | null }>(pool, s.next([]));
      return rows[0]?.wake_at ?? undefined;
    },

    async deleteTimer(id, timerId) {
      await run(pool, s.delete([id, timerId]));
    },

    async deferTimer(id, timerId, wakeAtMs) {
      const wake = wakeText({ kind: "timer", executionId: id, wakeAtMs });
      await run(pool, s.defer([id, timerId, wakeAtMs, channel, wake ?? null]));
    },
  };
}
