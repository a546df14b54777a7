/**
 * Cron schedules (S11) and notices (S10) on SQLite: the small tables a runtime's background loop
 * reads. Taking notices reads first and deletes only what it read, so an owner with none pays a
 * read, not a write, and a notice posted meanwhile is kept for the next take.
 */
import { jsonText } from "../../kernel/json.ts";
import type { NoticeKind, NoticeStore, ScheduleStore } from "../spi.ts";
import { scheduleOf } from "../rows.ts";
import type { Statements } from "./statements.ts";

export function sqliteSchedules(q: Statements): ScheduleStore & NoticeStore {
  return {
    async putSchedule(s) {
      q.putSchedule.run({
        name: s.name,
        flow: s.flow,
        cron: s.cron,
        timezone: s.timezone,
        input: s.input === undefined ? null : jsonText(s.input),
        fromMs: s.fromMs,
      });
    },

    async listSchedules() {
      return q.schedules.all().map(scheduleOf);
    },

    async advanceSchedule(name, cursorMs) {
      q.advanceSchedule.run(cursorMs, name, cursorMs);
    },

    async deleteSchedule(name) {
      q.deleteSchedule.run(name);
    },

    async setSchedulePaused(name, paused, cursorMs) {
      return q.setSchedulePaused.run({ name, paused: paused ? 1 : 0, cursorMs }).changes > 0;
    },

    async takeNotices(owner) {
      const rows = q.notices.all(owner);
      const lastRow = rows[rows.length - 1];
      if (!lastRow) return [];
      q.forgetNotices.run(owner, lastRow.id);
      return rows.map((r) => ({
        executionId: r.execution_id,
        kind: r.kind as NoticeKind,
        atMs: r.at,
      }));
    },
  };
}
