import { spawn } from "./support/processes.ts";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import {
  flow$,
  memoryStore,
  NotResumableError,
  step$,
  type Envelope,
  type EffectContext,
  type Store,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { expectReplayEquality, mulberry32, runtimes, until } from "./helpers.ts";

const rt = runtimes();

/** A step that waits ten minutes unless its signal aborts; records when it saw the abort. */
function tenMinutes(seen: { started: number; abortedAt?: number }) {
  return step$("ten-minutes", async (_: null, ectx: EffectContext) => {
    seen.started++;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 600_000);
      ectx.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        seen.abortedAt = performance.now();
        reject(new Error("aborted"));
      });
    });
    return "slept";
  });
}

const kinds = (log: Envelope[]) => log.map((e) => e.kind);
const terminals = (log: Envelope[]) =>
  log.filter((e) => e.kind.startsWith("EXECUTION_") && e.kind !== "EXECUTION_STARTED");

describe("cancel (ADR 0020 K8.2)", () => {
  for (const via of ["handle", "runtime"] as const) {
    it(`a step sleeping 10 minutes is cancelled, not waited for, through the ${via}`, async () => {
      const seen: { started: number; abortedAt?: number } = { started: 0 };
      const f = flow$("long", async (ctx) => ctx.execute(tenMinutes(seen), null));
      const r = rt(memoryStore()).registerFlow(f);
      const h = await r.start(f, null, { id: `long-${via}` });
      await until(async () => kinds(await r.readLog(h.id)).includes("STEP_STARTED"));
      const t0 = performance.now();
      const cancelled =
        via === "handle" ? await h.cancel("user asked") : await r.cancel(h.id, "user asked");
      expect(cancelled).toBe(true);
      const outcome = await h.result();
      // Before the step's 10 minutes: the cancel ended it (a latency figure is a bench's job).
      expect(performance.now() - t0).toBeLessThan(600_000);
      expect(seen.abortedAt).toBeDefined();
      expect((seen.abortedAt ?? Infinity) - t0).toBeLessThan(600_000);
      expect(outcome.status).toBe("cancelled");
      expect(outcome.error?.code).toBe("LOOM_CANCELLED");
      const log = await r.readLog(h.id);
      expect(kinds(log).slice(-3)).toEqual([
        "RESOURCE_METERED",
        "STEP_CANCELLED",
        "EXECUTION_CANCELLED",
      ]);
      expect(log.at(-1)?.payload).toMatchObject({ reason: "user asked" });
      // Metering on abort (A2): at least the wall time, marked as an estimate.
      const metered = log.at(-3)?.payload as { delta: { wallMs: number; estimated: boolean } };
      expect(metered.delta.estimated).toBe(true);
      expect(metered.delta.wallMs).toBeGreaterThanOrEqual(0);
      const state = await r.getState(h.id);
      expect(state.status).toBe("cancelled");
      expect(state.frames["ten-minutes#0"]?.status).toBe("cancelled");
      expect(state.inFlight).toBe(0);
      await expectReplayEquality(r, h.id);
      // Cancelled is final: a second cancel changes nothing, a resume is refused.
      expect(await r.cancel(h.id)).toBe(false);
      await expect(r.resume(h.id, "late")).rejects.toThrow(NotResumableError);
      expect(await r.readLog(h.id)).toHaveLength(log.length);
    });
  }

  it("a flow body never sees an error from a step that settles while its cancel commits (R6)", async () => {
    const caught: string[] = [];
    let open!: () => void;
    const gate = new Promise<string>((r) => (open = () => r("x")));
    const f = flow$("r6", async (ctx) => {
      try {
        await ctx.run("a", () => gate);
      } catch (e) {
        caught.push(String((e as { code?: string }).code ?? e));
      }
      return "end";
    });
    const inner = memoryStore();
    const slow: Store = Object.create(inner) as Store;
    slow.appendMany = async (b) => {
      await new Promise((r) => setTimeout(r, 30));
      return inner.appendMany(b);
    };
    const r = rt(slow).registerFlow(f);
    const h = await r.start(f, null, { id: "r6-1" });
    await until(async () => kinds(await r.readLog(h.id)).includes("STEP_STARTED"));
    const cancelling = r.cancel(h.id, "stop");
    setTimeout(open, 5);
    expect(await cancelling).toBe(true);
    expect((await h.result()).status).toBe("cancelled");
    expect(caught).toEqual([]);
  });

  it("cancelling a stuck execution settles it: its result is the cancel", async () => {
    const store = memoryStore();
    const v1 = flow$("f", async (ctx) => {
      await ctx.run("a", () => 1);
      await ctx.suspend();
    });
    const a = rt(store, { ownerId: "A" }).registerFlow(v1);
    await a.start(v1, null, { id: "s-1" });
    await until(async () => (await a.getState("s-1")).status === "parked");
    await a.close();
    const v2 = flow$("f", async (ctx) => {
      await ctx.run("b", () => 1);
      await ctx.suspend();
    });
    const errors: string[] = [];
    const b = rt(store.reopen(), { ownerId: "B", onError: (e) => errors.push(e.name) });
    b.registerFlow(v2);
    await b.resume("s-1", 1).catch(() => undefined);
    await until(() => errors.includes("NonDeterminismError"));
    await expect(b.handle("s-1").result()).rejects.toThrow(/recorded|non-?determinism/i);
    expect(await b.cancel("s-1", "stuck")).toBe(true);
    expect(await b.handle("s-1").result()).toMatchObject({ status: "cancelled" });
  });

  it("cancels a parked execution that no process drives", async () => {
    const f = flow$("waits", async (ctx) => ctx.suspend());
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "parked-1" });
    await until(async () => (await r.getState(h.id)).status === "parked");
    expect(await r.cancel(h.id, "no longer needed")).toBe(true);
    expect((await h.result()).status).toBe("cancelled");
    await expectReplayEquality(r, h.id);
  });

  it("a cancel racing a completion leaves exactly one terminal event", async () => {
    const rand = mulberry32(7);
    const f = flow$("quick", async (ctx) => {
      await ctx.run("a", () => new Promise((r) => setTimeout(r, Math.floor(rand() * 4))));
      return ctx.run("b", () => "done");
    });
    const store = memoryStore();
    const owner = rt(store).registerFlow(f);
    const other = rt(store.reopen(), { ownerId: "other" }).registerFlow(f);
    const results = { cancelled: 0, completed: 0 };
    for (let i = 0; i < 30; i++) {
      const id = `race-${i}`;
      const h = await owner.start(f, null, { id });
      await new Promise((r) => setTimeout(r, Math.floor(rand() * 5)));
      const canceller = i % 2 === 0 ? owner : other;
      const won = await canceller.cancel(id).catch((e: unknown) => e);
      const outcome = await h.result();
      results[outcome.status as "cancelled" | "completed"]++;
      expect(won === true).toBe(outcome.status === "cancelled");
      const log = await owner.readLog(id);
      expect(terminals(log)).toHaveLength(1);
      expect(log.at(-1)?.kind).toBe(terminals(log)[0]?.kind);
    }
    // Both sides of the race were taken (about half each over 30 seeded rounds).
    expect(results.cancelled).toBeGreaterThan(0);
    expect(results.completed).toBeGreaterThan(0);
    expect(results.cancelled + results.completed).toBe(30);
  });

  it("a paused owner whose execution another process cancelled cannot append its late STEP_COMPLETED", async () => {
    const store = memoryStore();
    let finish!: () => void;
    const gate = new Promise<void>((r) => (finish = r));
    // The effect ignores its signal, and its owner takes no notices: a zombie.
    const stubborn = step$("stubborn", async () => {
      await gate;
      return "late";
    });
    const f = flow$("zombie", async (ctx) => ctx.execute(stubborn, null));
    const zombie = rt(store, { ownerId: "zombie", background: false }).registerFlow(f);
    const h = await zombie.start(f, null, { id: "z-1" });
    await until(async () => kinds(await zombie.readLog(h.id)).includes("STEP_STARTED"));
    const other = rt(store.reopen(), { ownerId: "other", background: false }).registerFlow(f);
    expect(await other.cancel(h.id, "reclaimed")).toBe(true);
    const atCancel = await other.readLog(h.id);
    finish();
    await new Promise((r) => setTimeout(r, 50));
    const after = await other.readLog(h.id);
    expect(after).toEqual(atCancel);
    expect(after.at(-1)?.kind).toBe("EXECUTION_CANCELLED");
    expect(kinds(after)).not.toContain("STEP_COMPLETED");
  });

  it("is cancelled from a second OS process on the same SQLite file", async () => {
    const db = join(mkdtempSync(join(tmpdir(), "loom-cancel-")), "loom.db");
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(import.meta.dirname, "support", "cancel-child.ts"), db, "x-1"],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const events: { event: string; at: number }[] = [];
    createInterface({ input: child.stdout }).on("line", (line) =>
      events.push(JSON.parse(line) as { event: string; at: number }),
    );
    try {
      await until(() => events.some((e) => e.event === "started"), 20_000);
      const r = rt(sqliteStore(db), { background: false });
      await until(async () => kinds(await r.readLog("x-1")).includes("STEP_STARTED"));
      const t0 = performance.timeOrigin + performance.now();
      expect(await r.cancel("x-1", "from another process")).toBe(true);
      await until(() => events.some((e) => e.event === "aborted"), 2000);
      const abortedAt = events.find((e) => e.event === "aborted")?.at ?? Infinity;
      // Before the step's 10 minutes: the cancel reached it (a latency figure is a bench's job).
      expect(abortedAt - t0).toBeLessThan(600_000);
      const log = await r.readLog("x-1");
      expect(kinds(log).slice(-2)).toEqual(["STEP_CANCELLED", "EXECUTION_CANCELLED"]);
      expect((await r.getState("x-1")).status).toBe("cancelled");
      await expectReplayEquality(r, "x-1");
    } finally {
      child.kill("SIGTERM");
    }
  });

  it("refuses a bad reason and an unknown id before anything is written", async () => {
    const r = rt(memoryStore());
    await expect(r.cancel("nope")).rejects.toThrow(/no execution/);
    await expect(r.cancel("nope", "")).rejects.toThrow(/reason/);
    await expect(r.cancel("nope", "x".repeat(1001))).rejects.toThrow(/reason/);
  });
});
