/**
 * Cron schedules (S11) and notices (S10) in the memory store: the small tables a runtime's
 * background loop reads. Schedules are kept as copies (`structuredClone`); a notice is taken once,
 * and an owner with none pays a scan, not a write.
 */
import type { NoticeStore, ScheduleStore } from "../spi.ts";
import { live, type Handle } from "./data.ts";

export function memorySchedules(h: Handle): ScheduleStore & NoticeStore {
  const { data } = h;
  return {
    // S11, S23: a redefinition keeps fromMs, the cursor and the pause.
    async putSchedule(schedule) {
      live(h);
      const known = data.schedules.get(schedule.name);
      const copy = structuredClone(schedule);
      data.schedules.set(
        schedule.name,
        known
          ? { ...copy, fromMs: known.fromMs, cursorMs: known.cursorMs, paused: known.paused }
          : { ...copy, cursorMs: copy.fromMs, paused: false },
      );
    },

    async listSchedules() {
      live(h);
      return [...data.schedules.values()]
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .map((s) => structuredClone(s));
    },

    async advanceSchedule(name, cursorMs) {
      live(h);
      const known = data.schedules.get(name);
      if (known && cursorMs > known.cursorMs) known.cursorMs = cursorMs;
    },

    async deleteSchedule(name) {
      live(h);
      data.schedules.delete(name);
    },

    async setSchedulePaused(name, paused, cursorMs) {
      live(h);
      const known = data.schedules.get(name);
      if (!known) return false;
      known.paused = paused;
      if (cursorMs > known.cursorMs) known.cursorMs = cursorMs;
      return true;
    },

    async takeNotices(owner) {
      live(h);
      if (!data.notices.some((n) => n.owner === owner)) return [];
      const mine = data.notices.filter((n) => n.owner === owner);
      data.notices = data.notices.filter((n) => n.owner !== owner);
      return mine.map(({ executionId, kind, atMs }) => ({ executionId, kind, atMs }));
    },
  };
}
