/**
 * Pausing and resuming a schedule (schedules.ts SC4, store S23): a paused schedule starts no
 * occurrence, a put again keeps the pause, a resume starts from now (what was missed while paused
 * never starts), and only the owner pauses an owned schedule (SC2).
 */
import { describe, expect, it } from "vitest";
import { flow$, memoryStore } from "../src/index.ts";
import { nextOccurrences, occurrenceId } from "../src/runtime/schedules.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();
const T0 = Date.UTC(2026, 11, 1, 8, 0, 0);
const MINUTE = 60_000;
const tick = flow$("tick", async (ctx) => ctx.run("note", () => 1));

function clocked() {
  const clock = { t: T0, now: () => clock.t };
  const r = rt(memoryStore(), { clock, background: false }).registerFlow(tick);
  return { clock, r };
}

describe("schedule pause and resume (SC4, S23)", () => {
  it("a paused schedule starts nothing; a resume starts the first occurrence after it, never the missed ones", async () => {
    const { clock, r } = clocked();
    await r.schedule(tick, { cron: "* * * * *", name: "minutely" });
    clock.t = T0 + MINUTE;
    expect(await r.fireSchedules()).toEqual([occurrenceId("minutely", T0 + MINUTE)]);
    expect((await r.pauseSchedule("minutely")).paused).toBe(true);
    clock.t = T0 + 5 * MINUTE;
    expect(await r.fireSchedules()).toEqual([]);
    // A put again (a redeploy) keeps the pause (S23).
    expect((await r.schedule(tick, { cron: "* * * * *", name: "minutely" })).paused).toBe(true);
    expect(await r.fireSchedules()).toEqual([]);
    clock.t = T0 + 5 * MINUTE + 30_000;
    const resumed = await r.resumeSchedule("minutely");
    expect(resumed).toMatchObject({ paused: false, cursorMs: T0 + 5 * MINUTE + 30_000 });
    expect(await r.fireSchedules()).toEqual([]);
    clock.t = T0 + 6 * MINUTE;
    expect(await r.fireSchedules()).toEqual([occurrenceId("minutely", T0 + 6 * MINUTE)]);
    const started = (await r.list()).map((x) => x.executionId);
    expect(started.sort()).toEqual([
      occurrenceId("minutely", T0 + MINUTE),
      occurrenceId("minutely", T0 + 6 * MINUTE),
    ]);
  });

  it("the next occurrences are in the schedule's time zone, none while paused", async () => {
    const { r } = clocked();
    const s = await r.schedule(tick, {
      cron: "0 9 * * *",
      name: "ny",
      timezone: "America/New_York",
    });
    // 09:00 in New York in December is 14:00 UTC.
    expect(nextOccurrences(s, T0, 2)).toEqual([
      Date.UTC(2026, 11, 1, 14, 0, 0),
      Date.UTC(2026, 11, 2, 14, 0, 0),
    ]);
    expect(nextOccurrences(await r.pauseSchedule("ny"), T0, 2)).toEqual([]);
  });

  it("only its owner pauses or resumes an owned schedule (attacker: another principal); an unknown one is not found", async () => {
    const { r } = clocked();
    await r.schedule(tick, { cron: "* * * * *", name: "owned", principal: "alice" });
    await expect(r.pauseSchedule("owned", { as: "mallory" })).rejects.toMatchObject({
      code: "LOOM_UNAUTHORIZED",
    });
    await expect(r.pauseSchedule("owned")).rejects.toMatchObject({ code: "LOOM_UNAUTHORIZED" });
    expect((await r.schedules())[0]?.paused).toBe(false);
    expect((await r.pauseSchedule("owned", { as: "alice" })).paused).toBe(true);
    await expect(r.resumeSchedule("owned", { as: "mallory" })).rejects.toMatchObject({
      code: "LOOM_UNAUTHORIZED",
    });
    expect((await r.schedules())[0]?.paused).toBe(true);
    await expect(r.pauseSchedule("nope")).rejects.toMatchObject({ code: "LOOM_NOT_FOUND" });
    await expect(r.pauseSchedule("bad name!")).rejects.toMatchObject({ code: "LOOM_INVALID_ID" });
  });
});
