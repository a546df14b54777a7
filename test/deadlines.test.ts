import { describe, expect, it, vi } from "vitest";
import {
  flow$,
  InvalidInputError,
  isLoomError,
  memoryStore,
  QuotaExceededError,
  step$,
  StepTimeoutError,
  type EffectContext,
  type Envelope,
} from "../src/index.ts";
import { armDeadline } from "../src/runtime/deadline.ts";
import { expectReplayEquality, offsetClock, runtimes, until } from "./helpers.ts";
import { slow as scaled } from "./support/slowdown.ts";

const rt = runtimes();

/** Waits ten minutes unless its signal aborts. */
async function tenMinutes(signal: AbortSignal): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, 600_000);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
    });
  });
  return "slept";
}

const find = (log: Envelope[], kind: string) => log.find((e) => e.kind === kind);

describe("step timeoutMs and flow deadlineMs (ADR 0020 K8.3, A4, L26)", () => {
  it("a 10 s step whose process dies 7 s in times out 10 s after its logged start, not 17 s", async () => {
    const store = memoryStore();
    const clock = offsetClock();
    const slow = step$("slow", async (_: null, ectx: EffectContext) => tenMinutes(ectx.signal));
    const f = flow$("timed", async (ctx) =>
      ctx
        .execute(slow, null, { timeoutMs: 10_000 })
        .catch((e: unknown) => (e instanceof StepTimeoutError ? "timed out" : String(e))),
    );
    const a = rt(store, { clock, leaseTtlMs: 1000, background: false, ownerId: "A" });
    a.registerFlow(f);
    await a.start(f, null, { id: "t-1" });
    await until(async () => find(await a.readLog("t-1"), "STEP_STARTED") !== undefined);
    clock.advance(7000);
    await a.close(); // the process is gone 7 s into the step
    const b = rt(store.reopen(), { clock, leaseTtlMs: 1000, background: false, ownerId: "B" });
    b.registerFlow(f);
    clock.advance(2000); // recovered 9 s in: 1 s of the timeout is left
    expect(await b.recoverAbandoned()).toEqual(["t-1"]);
    const outcome = await b.waitForCompletion("t-1", { timeoutMs: scaled(5000) });
    expect(outcome).toEqual({ status: "completed", output: "timed out" });
    const log = await b.readLog("t-1");
    // The logged start the timeout counts from: the start's own time (its envelope may be
    // written a little later, at the next group commit).
    const started = find(log, "STEP_STARTED");
    const startedAt = (started?.payload as { startedAt?: number }).startedAt ?? started?.at ?? 0;
    const failed = log.filter((e) => e.kind === "STEP_FAILED").at(-1);
    expect((failed?.payload as { error: { code: string } }).error.code).toBe("LOOM_STEP_TIMEOUT");
    const elapsed = (failed?.at ?? 0) - startedAt;
    expect(elapsed).toBeGreaterThanOrEqual(10_000);
    // Counted from the logged start, not restarted at recovery (9 s + a fresh 10 s).
    expect(elapsed).toBeLessThan(9_000 + 10_000);
    // The timed-out attempt was metered before the error was rethrown (A2).
    const metered = log.filter((e) => e.kind === "RESOURCE_METERED");
    expect(metered.length).toBeGreaterThanOrEqual(1);
    await expectReplayEquality(b, "t-1");
  });

  it("a step recovered after its timeout passed is not started again (K8.1 pre-flight)", async () => {
    const store = memoryStore();
    const clock = offsetClock();
    let calls = 0;
    const slow = step$("slow", async (_: null, ectx: EffectContext) => {
      calls++;
      return tenMinutes(ectx.signal);
    });
    const f = flow$("late", async (ctx) =>
      ctx.execute(slow, null, { timeoutMs: 1000 }).catch((e: unknown) => String(e)),
    );
    const a = rt(store, { clock, leaseTtlMs: 1000, background: false, ownerId: "A" });
    a.registerFlow(f);
    await a.start(f, null, { id: "pf-1" });
    await until(async () => find(await a.readLog("pf-1"), "STEP_STARTED") !== undefined);
    await a.close();
    clock.advance(5000);
    const b = rt(store.reopen(), { clock, leaseTtlMs: 1000, background: false, ownerId: "B" });
    b.registerFlow(f);
    await b.recoverAbandoned();
    const outcome = await b.waitForCompletion("pf-1", { timeoutMs: scaled(5000) });
    expect(outcome.output).toMatch(/ran past its timeoutMs of 1000 ms/);
    expect(calls).toBe(1);
    // No attempt was counted for the recovery: the step failed without starting again.
    const kinds = (await b.readLog("pf-1")).map((e) => e.kind);
    expect(kinds.filter((k) => k === "STEP_STARTED")).toHaveLength(1);
  });

  it("a ctx.run step that ignores its signal still ends at its timeout", async () => {
    let finished = false;
    const ignores = () =>
      new Promise((r) =>
        setTimeout(() => {
          finished = true;
          r("late");
        }, 60_000).unref(),
      );
    const f = flow$("stubborn", async (ctx) =>
      ctx
        .run("ignores", ignores, { timeoutMs: 100 })
        .catch((e: unknown) => (isLoomError(e) ? e.code : "other")),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out.output).toBe("LOOM_STEP_TIMEOUT");
    // Before the code's own minute: the timeout ended the step, not the code.
    expect(finished).toBe(false);
  });

  it("an execution past its deadlineMs is cancelled, also when its process died first", async () => {
    const store = memoryStore();
    const clock = offsetClock();
    const f = flow$(
      "bounded",
      async (ctx) =>
        ctx.execute(
          step$("forever", (_: null, e) => tenMinutes(e.signal)),
          null,
        ),
      { deadlineMs: 2000 },
    );
    const a = rt(store, { clock, leaseTtlMs: 1000, background: false, ownerId: "A" });
    a.registerFlow(f);
    await a.start(f, null, { id: "d-1" });
    await until(async () => find(await a.readLog("d-1"), "STEP_STARTED") !== undefined);
    clock.advance(1500);
    await a.close();
    const b = rt(store.reopen(), { clock, leaseTtlMs: 1000, background: false, ownerId: "B" });
    b.registerFlow(f);
    await b.recoverAbandoned();
    const outcome = await b.waitForCompletion("d-1", { timeoutMs: scaled(5000) });
    expect(outcome.status).toBe("cancelled");
    expect(outcome.error?.code).toBe("LOOM_DEADLINE_EXCEEDED");
    const log = await b.readLog("d-1");
    const elapsed = (log.at(-1)?.at ?? 0) - (log[0]?.at ?? 0);
    expect(elapsed).toBeGreaterThanOrEqual(2000);
    // Counted from the start, not restarted at recovery (1.5 s + a fresh 2 s).
    expect(elapsed).toBeLessThan(1500 + 2000);
    expect(log.map((e) => e.kind).slice(-2)).toEqual(["STEP_CANCELLED", "EXECUTION_CANCELLED"]);
    expect(log[0]?.payload).toMatchObject({ deadlineMs: 2000 });
    await expectReplayEquality(b, "d-1");
  });

  it("a run woken past its deadline (a sleep outlasted it) runs no further step", async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const ran: string[] = [];
      const f = flow$(
        `sleeps-past-${i}`,
        async (ctx) => {
          await ctx.sleep(150);
          await ctx.run("charge", () => ran.push("charge"));
          return "done";
        },
        { deadlineMs: 50 },
      );
      const r = rt(memoryStore()).registerFlow(f);
      const out = await (await r.start(f, null)).result();
      outcomes.push(`${out.status}/${out.error?.code ?? ""}/${ran.join(",") || "-"}`);
    }
    expect(outcomes).toEqual(Array(5).fill("cancelled/LOOM_DEADLINE_EXCEEDED/-"));
  });

  it("a parked body still cached, resumed past its deadline, is cancelled even when it returns without another call (issue 21)", async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const clock = offsetClock();
      const f = flow$(`cached-past-${i}`, async (ctx) => ctx.suspend<string>(), {
        deadlineMs: 1_000,
      });
      const r = rt(memoryStore(), { clock }).registerFlow(f);
      const h = await r.start(f, null);
      await until(async () => (await r.getState(h.id)).status === "parked");
      clock.advance(5_000); // the deadline passed while it was parked, its body cached
      await r.resume(h.id, "late");
      const out = await h.result();
      outcomes.push(`${out.status}/${out.error?.code ?? ""}`);
    }
    expect(outcomes).toEqual(Array(5).fill("cancelled/LOOM_DEADLINE_EXCEEDED"));
  });

  it("start({ deadlineMs }) overrides the flow's", async () => {
    const f = flow$("waits", async (ctx) => ctx.run("w", (e) => tenMinutes(e.signal)), {
      deadlineMs: 600_000,
    });
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { deadlineMs: 100 })).result();
    expect(out.error?.code).toBe("LOOM_DEADLINE_EXCEEDED");
  });

  it("refuses NaN, 0, negative and Infinity durations at every entry point", async () => {
    const bad = [NaN, 0, -5, Infinity, "10" as unknown as number];
    const r = rt(memoryStore());
    for (const v of bad) {
      expect(() => step$("s", () => 1, { timeoutMs: v })).toThrow(InvalidInputError);
      expect(() => flow$("f", async () => 1, { deadlineMs: v })).toThrow(InvalidInputError);
      const handmade = { ...flow$("handmade", async () => 1), deadlineMs: v };
      expect(() => r.registerFlow(handmade)).toThrow(InvalidInputError);
      const ok = flow$("ok", async () => 1);
      await expect(r.start(ok, null, { id: "never", deadlineMs: v })).rejects.toThrow(
        InvalidInputError,
      );
    }
    expect(await r.list()).toEqual([]);
    const f = flow$("bad-run", async (ctx) => {
      const codes: string[] = [];
      for (const v of bad) {
        await ctx
          .run("x", () => 1, { timeoutMs: v })
          .catch((e: unknown) => codes.push(isLoomError(e) ? e.code : "?"));
        await ctx
          .execute(
            step$("y", () => 1),
            null,
            { timeoutMs: v },
          )
          .catch((e: unknown) => codes.push(isLoomError(e) ? e.code : "?"));
      }
      return codes;
    });
    r.registerFlow(f);
    const out = await (await r.start(f, null, { id: "bad-run" })).result();
    expect(out.output).toEqual(Array(10).fill("LOOM_INVALID_INPUT"));
    expect((await r.readLog("bad-run")).map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "EXECUTION_COMPLETED",
    ]);
  });

  it("timing out an expensive call and trying again cannot spend past the budget (A2)", async () => {
    let calls = 0;
    const expensive = step$("expensive", async (_: null, ectx: EffectContext) => {
      calls++;
      ectx.meter({ tokens: { input: 10, output: 0 } });
      return tenMinutes(ectx.signal);
    });
    const f = flow$(
      "loops",
      async (ctx) => {
        for (let i = 0; i < 50; i++) {
          try {
            await ctx.execute(expensive, i, { timeoutMs: 30, retry: false });
          } catch (e) {
            if (e instanceof QuotaExceededError) return { stoppedAt: i };
          }
        }
        return { stoppedAt: -1 };
      },
      { budget: { wallMs: 200 } },
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "loop-1" })).result();
    const stoppedAt = (out.output as { stoppedAt: number }).stoppedAt;
    expect(stoppedAt).toBeGreaterThan(0);
    expect(calls).toBe(stoppedAt);
    const spent = (await r.getState("loop-1"))._resources;
    expect(spent?.wallMs).toBeGreaterThanOrEqual(200);
    // Over by at most the one call admitted before the budget ran out: what the calls before the
    // last one spent was under the budget (an order of facts, however slow the machine).
    const walls = (await r.readLog("loop-1"))
      .filter((e) => e.kind === "RESOURCE_METERED")
      .map((e) => (e.payload as { delta: { wallMs?: number } }).delta.wallMs ?? 0);
    expect(walls).toHaveLength(calls);
    const beforeLast = walls.slice(0, -1).reduce((a, b) => a + b, 0);
    expect(beforeLast).toBeLessThan(200);
    expect(spent?.tokens?.input).toBe(10 * calls);
  });

  it("a cancel stops an execution whose retry says yes to everything, its backoff ending at once", async () => {
    let calls = 0;
    const flaky = step$("flaky", async () => {
      calls++;
      throw new Error("flaky");
    });
    const f = flow$("retries", async (ctx) =>
      ctx.execute(flaky, null, {
        retry: { maxAttempts: 100, initialDelayMs: 60_000, isRetryable: () => true },
      }),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "rb-1" });
    await until(async () => (await r.readLog(h.id)).some((e) => e.kind === "STEP_FAILED"));
    const t0 = Date.now();
    expect(await h.cancel()).toBe(true);
    expect((await h.result()).status).toBe("cancelled");
    // Before the 60 s backoff: the cancel ended it.
    expect(Date.now() - t0).toBeLessThan(60_000);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(calls).toBe(1);
  });
});

describe("deadline timers on the runtime clock", () => {
  it("a simulated clock fires a deadline above 2^31-1 ms at the right time, in chunks", () => {
    vi.useFakeTimers();
    try {
      const clock = { now: () => Date.now() };
      const budget = 3_000_000_000;
      const at = clock.now() + budget;
      let firedAt: number | undefined;
      armDeadline(clock, at, budget, () => (firedAt = clock.now()));
      vi.advanceTimersByTime(2 ** 31 - 1);
      expect(firedAt).toBeUndefined();
      vi.advanceTimersByTime(budget - (2 ** 31 - 1) - 1);
      expect(firedAt).toBeUndefined();
      vi.advanceTimersByTime(1);
      expect(firedAt).toBe(at);
    } finally {
      vi.useRealTimers();
    }
  });

  it("an offset clock measures from the offset anchor; a fixed clock never fires a budget above 2^31-1 ms", () => {
    vi.useFakeTimers();
    try {
      const offset = { now: () => Date.now() + 3_600_000 };
      let offsetFired = false;
      // Anchored 400 ms ago on the offset clock, with a 1 s budget: 600 ms are left.
      armDeadline(offset, offset.now() - 400 + 1000, 1000, () => (offsetFired = true));
      vi.advanceTimersByTime(599);
      expect(offsetFired).toBe(false);
      vi.advanceTimersByTime(1);
      expect(offsetFired).toBe(true);

      const fixed = { now: () => 1_000 };
      let fixedFired = false;
      armDeadline(fixed, 1_000 + 3e9, 3e9, () => (fixedFired = true));
      vi.advanceTimersByTime(10e9);
      expect(fixedFired).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});
