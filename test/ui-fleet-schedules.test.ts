/**
 * The dashboard's schedules and fleet endpoints (ui/fleet-pages.ts FP1..FP3, routes.ts P2):
 * `GET /api/schedules` with next occurrences in the schedule's zone and none while paused, the
 * pause and resume writes (absent from a read-only server), and `GET /api/fleet` with a member
 * and the lease it holds.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, type Runtime } from "../src/index.ts";
import { startUiServer } from "../src/ui/server.ts";
import { scheduleRow } from "../src/ui/fleet-pages.ts";
import type { OwnedSchedule } from "../src/runtime/schedules.ts";
import type { FleetAnswer, ScheduleRow, SchedulesAnswer } from "../src/ui/api-types.ts";
import { until } from "./helpers.ts";

const T0 = Date.UTC(2026, 11, 1, 8, 0, 30);
const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

let release = () => {};
const held = flow$("held", async (ctx) =>
  ctx.run("wait", () => new Promise<number>((resolve) => (release = () => resolve(1)))),
);

async function serve(runtime: Runtime, readOnly = false) {
  const ui = await startUiServer({ runtime, port: 0, readOnly });
  closing.push(() => ui.close());
  const call = (path: string, init: RequestInit = {}) =>
    fetch(`${ui.url.replace(/\/$/, "")}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${ui.token}`, ...(init.headers ?? {}) },
    });
  const post = (path: string) =>
    call(path, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  return { call, post };
}

function runtime(opts: { background?: boolean } = {}): Runtime {
  const clock = { now: () => T0 };
  const r = createRuntime({ store: memoryStore(), clock, pollIntervalMs: 20, ...opts });
  closing.push(() => r.close());
  return r.registerFlow(held);
}

describe("GET /api/schedules and its writes (FP1..FP3)", () => {
  it("FP1: next occurrences in the schedule's zone, soonest first; none while paused; a resume brings them back", async () => {
    const r = runtime({ background: false });
    await r.schedule(held, { cron: "0 9 * * *", name: "ny", timezone: "America/New_York" });
    const { call, post } = await serve(r);
    const list = (await (await call("/api/schedules")).json()) as SchedulesAnswer;
    expect(list.nowMs).toBe(T0);
    const [row] = list.schedules;
    expect(row).toMatchObject({ name: "ny", flow: "held", paused: false });
    expect(row?.next.slice(0, 2)).toEqual([
      Date.UTC(2026, 11, 1, 14, 0, 0),
      Date.UTC(2026, 11, 2, 14, 0, 0),
    ]);
    expect(row?.next).toHaveLength(5);
    expect(row?.lastStartedMs).toBeUndefined();
    const paused = await post("/api/schedules/ny/pause");
    expect(paused.status).toBe(200);
    expect((await paused.json()) as ScheduleRow).toMatchObject({ paused: true, next: [] });
    expect(((await (await call("/api/schedules")).json()) as SchedulesAnswer).schedules).toEqual([
      expect.objectContaining({ paused: true, next: [] }),
    ]);
    const resumed = (await (await post("/api/schedules/ny/resume")).json()) as ScheduleRow;
    expect(resumed.paused).toBe(false);
    expect(resumed.next[0]).toBe(Date.UTC(2026, 11, 1, 14, 0, 0));
  });

  it("FP2: lastStartedMs is the latest occurrence started; a resume, which starts none, clears it", async () => {
    const clock = { t: T0, now: () => clock.t };
    const r = createRuntime({ store: memoryStore(), clock, background: false });
    closing.push(() => r.close());
    r.registerFlow(held);
    const s = await r.schedule(held, { cron: "* * * * *", name: "minutely" });
    expect(scheduleRow(s, clock.t).lastStartedMs).toBeUndefined();
    clock.t = T0 + 60_000;
    await r.fireSchedules();
    const started = Date.UTC(2026, 11, 1, 8, 1, 0);
    expect(scheduleRow((await r.schedules())[0] as OwnedSchedule, clock.t).lastStartedMs).toBe(
      started,
    );
    await r.pauseSchedule("minutely");
    const resumed = await r.resumeSchedule("minutely");
    expect(resumed.cursorMs).toBe(T0 + 60_000);
    expect(scheduleRow(resumed, clock.t).lastStartedMs).toBeUndefined();
  });

  it("FP3: an owned schedule is refused (403) and stays as it was; an unknown one is 404; a form post is 415", async () => {
    const r = runtime({ background: false });
    await r.schedule(held, { cron: "* * * * *", name: "owned", principal: "alice" });
    const { call, post } = await serve(r);
    const refused = await post("/api/schedules/owned/pause");
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
      "LOOM_UNAUTHORIZED",
    );
    expect((await r.schedules())[0]?.paused).toBe(false);
    expect((await post("/api/schedules/nope/pause")).status).toBe(404);
    const form = await call("/api/schedules/owned/pause", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "a=1",
    });
    expect(form.status).toBe(415);
  });

  it("P2: a read-only server has no pause or resume route, and the schedule is untouched", async () => {
    const r = runtime({ background: false });
    await r.schedule(held, { cron: "* * * * *", name: "open" });
    const { call, post } = await serve(r, true);
    expect((await post("/api/schedules/open/pause")).status).toBe(404);
    expect((await call("/api/schedules")).status).toBe(200);
    expect((await r.schedules())[0]?.paused).toBe(false);
  });
});

describe("GET /api/fleet", () => {
  it("answers the live members, each with the leases it holds now", async () => {
    const r = runtime();
    await r.start(held, null, { id: "driven" });
    const { call } = await serve(r);
    let answer: FleetAnswer | undefined;
    await until(async () => {
      answer = (await (await call("/api/fleet")).json()) as FleetAnswer;
      return answer.members[0]?.leases.length === 1;
    });
    expect(answer?.nowMs).toBe(T0);
    expect(answer?.members).toEqual([
      expect.objectContaining({
        owner: r.ownerId,
        flows: ["held"],
        lastHeartbeatMs: T0,
        pid: process.pid,
        leases: [{ executionId: "driven", fence: 1, expiresAtMs: T0 + r.leaseTtlMs }],
      }),
    ]);
    release();
    await r.waitForCompletion("driven");
  });
});
