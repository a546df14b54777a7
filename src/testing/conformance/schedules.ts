/**
 * S11: schedules keep their start and cursor across a redefinition; a cursor never moves back.
 * S23: a schedule's pause, kept across a redefinition; a resume moves the cursor forward only.
 */
import { describe, expect, it } from "./vitest.ts";
import { T0, type Harness } from "./helpers.ts";

const minutely = { name: "m", flow: "f", cron: "* * * * *", timezone: "UTC", fromMs: T0 };

export function scheduleSuite(h: Harness): void {
  describe("schedules (S11)", () => {
    it("puts, lists and deletes a schedule; its cursor starts at fromMs", async () => {
      const store = await h.open();
      expect(await store.listSchedules()).toEqual([]);
      await store.putSchedule({ ...minutely, input: { a: [1, 2] } });
      await store.putSchedule({ ...minutely, name: "b" });
      expect(await store.listSchedules()).toEqual([
        { ...minutely, name: "b", cursorMs: T0, paused: false },
        { ...minutely, input: { a: [1, 2] }, cursorMs: T0, paused: false },
      ]);
      await store.deleteSchedule("b");
      expect((await store.listSchedules()).map((s) => s.name)).toEqual(["m"]);
    });

    it("a redefinition keeps fromMs and the cursor; the cursor only moves forward", async () => {
      const store = await h.open();
      await store.putSchedule(minutely);
      await store.advanceSchedule("m", T0 + 120_000);
      await store.advanceSchedule("m", T0 + 60_000);
      await store.putSchedule({ ...minutely, cron: "*/5 * * * *", fromMs: T0 + 999_999 });
      expect(await store.listSchedules()).toEqual([
        { ...minutely, cron: "*/5 * * * *", cursorMs: T0 + 120_000, paused: false },
      ]);
    });

    it("S23: a pause is kept by a redefinition; setSchedulePaused moves the cursor forward only", async () => {
      const store = await h.open();
      await store.putSchedule(minutely);
      await store.advanceSchedule("m", T0 + 120_000);
      expect(await store.setSchedulePaused("m", true, T0 + 60_000)).toBe(true);
      await store.putSchedule({ ...minutely, cron: "*/5 * * * *" });
      expect(await store.listSchedules()).toEqual([
        { ...minutely, cron: "*/5 * * * *", cursorMs: T0 + 120_000, paused: true },
      ]);
      expect(await store.setSchedulePaused("m", false, T0 + 600_000)).toBe(true);
      expect(await store.listSchedules()).toEqual([
        { ...minutely, cron: "*/5 * * * *", cursorMs: T0 + 600_000, paused: false },
      ]);
      expect(await store.setSchedulePaused("nope", true, T0)).toBe(false);
      expect((await store.listSchedules()).map((s) => s.name)).toEqual(["m"]);
    });

    // Registered only for stores that can be reopened, as the other S5 tests are.
    const reopen = h.reopen;
    if (!reopen) return;
    it("survives a reopen (S5)", async () => {
      const store = await h.open();
      await store.putSchedule(minutely);
      await store.advanceSchedule("m", T0 + 60_000);
      await store.setSchedulePaused("m", true, T0);
      const again = await reopen(store);
      expect(await again.listSchedules()).toEqual([
        { ...minutely, cursorMs: T0 + 60_000, paused: true },
      ]);
    });
  });
}
