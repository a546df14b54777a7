/**
 * The fleet's members (members.ts M1..M4, store S22): a runtime running its background loop
 * writes a heartbeat row, at its first tick and then once per heartbeat period, and removes it on
 * a clean close; `fleet()` answers the live members with the leases each holds. On SQLite, a
 * worker and a dashboard sharing one file (two connections, as two processes have).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { STALE_BEATS } from "../src/runtime/members.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const dir = mkdtempSync(join(tmpdir(), "loom-members-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const HEARTBEAT_MS = 1000;
const T0 = 1_700_000_000_000;

/** Holds its lease inside a step until `release` is called. */
function holding() {
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  const f = flow$("holding", async (ctx) => ctx.run("wait", () => gate.then(() => 1)));
  return { f, release: () => release() };
}

describe("fleet members (members.ts M1..M4)", () => {
  it("M1: a heartbeat at the first tick, then once per period of the runtime clock, at once when the flows change", async () => {
    const store = memoryStore();
    const clock = { t: T0, now: () => clock.t };
    const { f } = holding();
    const r = rt(store, { clock, heartbeatMs: HEARTBEAT_MS, ownerId: "w1" }).registerFlow(f);
    await until(async () => (await store.members(0)).length === 1);
    expect(await store.members(0)).toEqual([
      {
        owner: "w1",
        flows: ["holding"],
        startedAtMs: T0,
        lastHeartbeatMs: T0,
        host: hostname(),
        pid: process.pid,
      },
    ]);
    // Many ticks (20 ms apart) within one period write nothing more.
    clock.t = T0 + HEARTBEAT_MS - 1;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await store.members(0))[0]?.lastHeartbeatMs).toBe(T0);
    clock.t = T0 + HEARTBEAT_MS;
    await until(async () => (await store.members(0))[0]?.lastHeartbeatMs === T0 + HEARTBEAT_MS);
    r.registerFlow(flow$("another", async () => 1));
    await until(async () => (await store.members(0))[0]?.flows.length === 2);
    expect((await store.members(0))[0]?.flows).toEqual(["another", "holding"]);
  });

  it("M2: a clean close removes the row; M4: a runtime without the loop writes none", async () => {
    const store = memoryStore();
    const reader = rt(store, { background: false, ownerId: "reader" });
    const worker = createRuntime({
      store,
      closeStore: false,
      ownerId: "worker",
      pollIntervalMs: 20,
    });
    try {
      await until(async () => (await reader.fleet()).members.length === 1);
      expect((await reader.fleet()).members.map((m) => m.owner)).toEqual(["worker"]);
    } finally {
      await worker.close();
    }
    expect(await store.members(0)).toEqual([]);
  });

  it("M3: a member silent for more than STALE_BEATS periods is left out; each live one comes with its leases", async () => {
    const store = memoryStore();
    const clock = { t: T0, now: () => clock.t };
    const { f, release } = holding();
    const worker = rt(store, { clock, heartbeatMs: HEARTBEAT_MS, ownerId: "w1" }).registerFlow(f);
    await worker.start(f, null, { id: "held" });
    const reader = rt(store, { clock, heartbeatMs: HEARTBEAT_MS, background: false });
    await until(async () => (await reader.fleet()).members[0]?.leases.length === 1);
    // A crashed member's row: its last heartbeat just past the cut, then just before it.
    const crashed = { owner: "crashed", flows: [], startedAtMs: T0 };
    const cut = T0 - STALE_BEATS * HEARTBEAT_MS;
    await store.heartbeat({ ...crashed, lastHeartbeatMs: cut });
    const answer = await reader.fleet();
    expect(answer.nowMs).toBe(T0);
    expect(answer.members.map((m) => m.owner)).toEqual(["crashed", "w1"]);
    await store.heartbeat({ ...crashed, lastHeartbeatMs: cut - 1 });
    const live = await reader.fleet();
    expect(live.members.map((m) => m.owner)).toEqual(["w1"]);
    expect(live.members[0]?.leases).toEqual([
      { executionId: "held", fence: 1, expiresAtMs: expect.any(Number) as number },
    ]);
    release();
    await worker.waitForCompletion("held");
    await until(async () => (await reader.fleet()).members[0]?.leases.length === 0);
  });

  it("SQLite: a dashboard (no loop) sees the worker sharing its file, and what it drives", async () => {
    const file = join(dir, "shared.db");
    const { f, release } = holding();
    // Closed by the test itself (M2), so not one of `rt`'s.
    const worker = createRuntime({
      store: sqliteStore(file),
      ownerId: "worker",
      pollIntervalMs: 20,
    });
    try {
      worker.registerFlow(f);
      await worker.start(f, null, { id: "driven" });
      const ui = rt(sqliteStore(file), { closeStore: true, background: false });
      await until(async () => (await ui.fleet()).members[0]?.leases.length === 1);
      const [member] = (await ui.fleet()).members;
      expect(member).toMatchObject({ owner: "worker", flows: ["holding"], pid: process.pid });
      expect(member?.leases.map((l) => l.executionId)).toEqual(["driven"]);
      release();
      await worker.waitForCompletion("driven");
      await worker.close();
      expect((await ui.fleet()).members).toEqual([]);
    } finally {
      await worker.close();
    }
  });
});
