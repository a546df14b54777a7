import { describe, expect, it } from "vitest";
import {
  flow$,
  InvalidInputError,
  memoryStore,
  occurrenceId,
  type MemoryStore,
  type Store,
} from "../src/index.ts";
import { mulberry32, runtimes } from "./helpers.ts";

const rt = runtimes();
const T0 = Date.UTC(2026, 10, 30, 8, 0, 0);
const MINUTE = 60_000;

/** A store whose cursor writes fail while `failing` is set: a crash between start and cursor. */
function flakyCursor(inner: MemoryStore, state: { failing: boolean }): Store {
  return {
    ...inner,
    advanceSchedule: async (name, at) => {
      if (state.failing) throw new Error("crashed before the cursor moved");
      return inner.advanceSchedule(name, at);
    },
  };
}

describe("schedules on the runtime clock (L27)", () => {
  it("a minutely schedule over 10 simulated minutes, a crash and two runtimes starts exactly 10 executions (SC1)", async () => {
    const rand = mulberry32(11);
    let t = T0;
    const clock = { now: () => t };
    const store = memoryStore();
    const tick = flow$("tick", async (ctx, input: { n: number }) =>
      ctx.run("note", () => input.n + 1),
    );
    const reported: Error[] = [];
    const open = (s: Store, owner: string) =>
      rt(s, {
        clock,
        background: false,
        ownerId: owner,
        onError: (e) => reported.push(e),
      }).registerFlow(tick);
    let a = open(store, "A");
    const b = open(store.reopen(), "B");
    await a.schedule(tick, { cron: "* * * * *", input: { n: 1 }, name: "minutely" });
    const crash = { failing: false };
    for (let minute = 1; minute <= 10; minute++) {
      t = T0 + minute * MINUTE + Math.floor(rand() * 30_000);
      if (minute === 5) {
        // A crashes after starting the occurrence, before its cursor moves; a new A comes up.
        const crashing = open(flakyCursor(store.reopen(), crash), "A-crashing");
        crash.failing = true;
        expect(await crashing.fireSchedules()).toEqual([]);
        expect(reported.map((e) => e.message)).toEqual(["crashed before the cursor moved"]);
        crash.failing = false;
        await a.close();
        a = open(store.reopen(), "A2");
      }
      // Both runtimes fire, in a random order, sometimes at once.
      const both = rand() < 0.5 ? [a, b] : [b, a];
      if (rand() < 0.5) await Promise.all(both.map((r) => r.fireSchedules()));
      else for (const r of both) await r.fireSchedules();
    }
    const started = (await b.list()).filter((x) => x.flow === "tick");
    const expected = Array.from({ length: 10 }, (_, i) =>
      occurrenceId("minutely", T0 + (i + 1) * MINUTE),
    );
    expect(started.map((x) => x.executionId).sort()).toEqual(expected);
    expect(expected[0]).toBe("minutely@2026-11-30T08:01:00.000Z");
    for (const id of expected) {
      expect(await b.waitForCompletion(id)).toEqual({ status: "completed", output: 2 });
    }
    expect((await store.listSchedules())[0]?.cursorMs).toBe(T0 + 10 * MINUTE);
  });

  it("a schedule that fails here is reported and does not stop the others or recovery", async () => {
    let t = T0;
    const clock = { now: () => t };
    const store = memoryStore();
    const reported: Error[] = [];
    const f = flow$("job", async (_ctx, input: { v: number }) => input.v);
    const r = rt(store, { clock, background: false, onError: (e) => reported.push(e) });
    r.registerFlow(f);
    await r.schedule(f, { cron: "* * * * *", name: "good", input: { v: 1 } });
    await r.schedule(f, { cron: "* * * * *", name: "later", input: { v: 1 } });
    // Stored by a node that knows a zone this one does not.
    await store.putSchedule({
      name: "alien",
      flow: "job",
      cron: "* * * * *",
      timezone: "Mars/Olympus",
      fromMs: T0,
    });
    // An occurrence already started under the input the schedule had before it was redefined:
    // its runtime crashed before the cursor moved (a caller cannot start it: kernel/ids.ts I2).
    t = T0 + MINUTE;
    const crashing = rt(flakyCursor(store.reopen(), { failing: true }), {
      clock,
      background: false,
      onError: () => undefined,
    }).registerFlow(f);
    expect(await crashing.fireSchedules()).toEqual([]);
    expect(await r.store.head(occurrenceId("later", T0 + MINUTE))).toBeGreaterThanOrEqual(0);
    await r.schedule(f, { cron: "* * * * *", name: "later", input: { v: 2 } });
    t = T0 + 2 * MINUTE;
    expect((await r.fireSchedules()).sort()).toEqual([
      occurrenceId("good", T0 + MINUTE),
      occurrenceId("good", T0 + 2 * MINUTE),
      occurrenceId("later", T0 + MINUTE),
      occurrenceId("later", T0 + 2 * MINUTE),
    ]);
    expect(reported.map((e) => e.message)).toEqual([
      expect.stringMatching(/schedule "alien".*not a cron schedule/),
    ]);
    expect(await r.waitForCompletion(occurrenceId("later", T0 + 2 * MINUTE))).toEqual({
      status: "completed",
      output: 2,
    });
  });

  it("catches up on occurrences missed while no runtime ran", async () => {
    let t = T0;
    const clock = { now: () => t };
    const f = flow$("nightly", async () => "ran");
    const r = rt(memoryStore(), { clock, background: false }).registerFlow(f);
    await r.schedule(f, { cron: "0 2 * * *" });
    t = T0 + 3 * 24 * 60 * MINUTE;
    expect(await r.fireSchedules()).toEqual([
      "nightly@2026-12-01T02:00:00.000Z",
      "nightly@2026-12-02T02:00:00.000Z",
      "nightly@2026-12-03T02:00:00.000Z",
    ]);
    expect(await r.fireSchedules()).toEqual([]);
  });

  it("refuses a bad cron expression, time zone or name before storing anything", async () => {
    const f = flow$("f", async () => 1);
    const store = memoryStore();
    const r = rt(store, { background: false }).registerFlow(f);
    await expect(r.schedule(f, { cron: "every minute" })).rejects.toThrow(InvalidInputError);
    await expect(r.schedule(f, { cron: "* * * * *", timezone: "Mars/Olympus" })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(r.schedule(f, { cron: "* * * * *", name: "a/b" })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(r.schedule("unknown", { cron: "* * * * *" })).rejects.toThrow(/no flow/);
    expect(await store.listSchedules()).toEqual([]);
  });
});
