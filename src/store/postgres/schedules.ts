/**
 * Cron schedules (S11, S23) and notices (S10) on PostgreSQL: the small tables a runtime's background
 * loop reads.
 */
import type pg from "pg";
import { jsonText } from "../../kernel/json.ts";
import type { NoticeKind, NoticeStore, ScheduleStore } from "../spi.ts";
import { run, statement, type Tables } from "./db.ts";
import { scheduleOf, type ScheduleRow } from "../rows.ts";

export function postgresSchedules(pool: pg.Pool, t: Tables): ScheduleStore & NoticeStore {
  const s = {
    // S11, S23: a redefinition keeps fromMs, the cursor and the pause.
    put: statement(
      "put_schedule",
      `INSERT INTO ${t.schedules} (name, flow, cron, timezone, input, from_ms, cursor_ms)
       VALUES ($1, $2, $3, $4, $5, $6, $6)
       ON CONFLICT (name) DO UPDATE SET flow = excluded.flow, cron = excluded.cron,
         timezone = excluded.timezone, input = excluded.input`,
    ),
    list: statement(
      "list_schedules",
      `SELECT name, flow, cron, timezone, input, from_ms, cursor_ms, paused FROM ${t.schedules}
       ORDER BY name`,
    ),
    advance: statement(
      "advance_schedule",
      `UPDATE ${t.schedules} SET cursor_ms = $2 WHERE name = $1 AND cursor_ms < $2`,
    ),
    delete: statement("delete_schedule", `DELETE FROM ${t.schedules} WHERE name = $1`),
    // S23: the pause and, in the same write, the cursor moved forward only.
    pause: statement(
      "pause_schedule",
      `UPDATE ${t.schedules} SET paused = $2, cursor_ms = GREATEST(cursor_ms, $3)
       WHERE name = $1`,
    ),
    // S10: taken once. A DELETE that finds nothing writes nothing (no transaction id, no WAL):
    // the empty answer a busy runtime gets most of the time costs an index read.
    takeNotices: statement(
      "take_notices",
      `DELETE FROM ${t.notices} WHERE owner = $1 RETURNING id, execution_id, kind, at`,
    ),
  };

  return {
    async putSchedule(x) {
      const input = x.input === undefined ? null : jsonText(x.input);
      await run(pool, s.put([x.name, x.flow, x.cron, x.timezone, input, x.fromMs]));
    },

    async listSchedules() {
      const { rows } = await run<ScheduleRow>(pool, s.list([]));
      return rows.map(scheduleOf);
    },

    async advanceSchedule(name, cursorMs) {
      await run(pool, s.advance([name, cursorMs]));
    },

    async deleteSchedule(name) {
      await run(pool, s.delete([name]));
    },

    async setSchedulePaused(name, paused, cursorMs) {
      const { rowCount } = await run(pool, s.pause([name, paused, cursorMs]));
      return (rowCount ?? 0) > 0;
    },

    async takeNotices(owner) {
      const { rows } = await run<{ id: number; execution_id: string; kind: string; at: number }>(
        pool,
        s.takeNotices([owner]),
      );
      return rows
        .sort((a, b) => a.id - b.id)
        .map((r) => ({ executionId: r.execution_id, kind: r.kind as NoticeKind, atMs: r.at }));
    },
  };
}
