/** S11: schedules keep their start and cursor across a redefinition; a cursor never moves back. */
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
        { ...minutely, name: "b", cursorMs: T0 },
        { ...minutely, input: { a: [1, 2] }, cursorMs: T0 },
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
        { ...minutely, cron: "*/5 * * * *", cursorMs: T0 + 120_000 },
      ]);
    });

    // Registered only for stores that can be reopened, as the other S5 tests are.
    const reopen = h.reopen;
    if (!reopen) return;
    it("survives a reopen (S5)", async () => {
      const store = await h.open();
      await store.putSchedule(minutely);
      await store.advanceSchedule("m", T0 + 60_000);
      const again = await reopen(store);
      expect(await again.listSchedules()).toEqual([{ ...minutely, cursorMs: T0 + 60_000 }]);
    });
  });
}
