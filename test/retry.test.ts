import { describe, expect, it, vi } from "vitest";
import {
  defaultIsRetryable,
  errorFromData,
  errorToData,
  flow$,
  InvalidInputError,
  RetryableError,
  isLoomError,
  memoryStore,
  QuotaExceededError,
  step$,
  TerminalError,
  type Envelope,
  type MiddlewareContext,
} from "../src/index.ts";
import { compose, rerunning, type Middleware } from "../src/effects/compose.ts";
import { backoffMs, retryMiddleware } from "../src/effects/retry.ts";
import { abortableDelay } from "../src/effects/delay.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { expectReplayEquality, offsetClock, runtimes, until } from "./helpers.ts";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const rt = runtimes();
const fast = { initialDelayMs: 5, maxDelayMs: 20 };

type Payload = { [k: string]: unknown };
const payloads = (log: Envelope[], kind: string) =>
  log.filter((e) => e.kind === kind).map((e) => e.payload as Payload);

describe("retryMiddleware (ADR 0020 A3)", () => {
  it("a flaky effect succeeds on its third attempt and the log shows the failed attempts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-retry-"));
    const seen: number[] = [];
    const flaky = step$("flaky", async (q: string, ectx) => {
      seen.push(ectx.attempt);
      ectx.meter({ tokens: { input: 10, output: 1 } });
      if (ectx.attempt < 3) throw new Error(`overloaded (attempt ${ectx.attempt})`);
      return `answer to ${q} (key ${ectx.idempotencyKey})`;
    });
    const f = flow$("asks", async (ctx) => ctx.execute(flaky, "tides", { retry: fast }));
    const r = rt(sqliteStore(join(dir, "loom.db"))).registerFlow(f);
    const out = await (await r.start(f, null, { id: "flaky-1" })).result();
    expect(out).toEqual({ status: "completed", output: "answer to tides (key flaky-1/flaky#0)" });
    expect(seen).toEqual([1, 2, 3]);

    const log = await r.readLog("flaky-1");
    const failed = payloads(log, "STEP_FAILED");
    expect(failed.map((p) => [p.callId, p.attempt, p.retrying])).toEqual([
      ["flaky#0", 1, true],
      ["flaky#0", 2, true],
    ]);
    expect(failed.map((p) => (p.error as { message: string }).message)).toEqual([
      "overloaded (attempt 1)",
      "overloaded (attempt 2)",
    ]);
    // The recorded wait is the seeded one: a re-run computes the same.
    for (const p of failed) {
      const waited = backoffMs(
        { maxAttempts: 3, backoffFactor: 2, jitter: 0.5, isRetryable: () => true, ...fast },
        "flaky-1/flaky#0",
        p.attempt as number,
        null,
      );
      expect(p.retryInMs).toBe(waited);
    }
    // Each attempt is started, metered on its own, and the step settles once.
    expect(log.filter((e) => e.kind === "STEP_STARTED")).toHaveLength(2);
    expect(payloads(log, "RESOURCE_METERED")).toHaveLength(3);
    expect(log.filter((e) => e.kind === "STEP_COMPLETED")).toHaveLength(1);
    const state = await r.getState("flaky-1");
    expect(state.frames["flaky#0"]).toMatchObject({ status: "completed", attempts: 3 });
    expect(state._resources?.tokens).toEqual({ input: 30, output: 3 });
    await expectReplayEquality(r, "flaky-1");
  });

  it("a permanent error stops at the maximum of attempts and reaches the flow", async () => {
    let calls = 0;
    const down = step$(
      "down",
      async () => {
        calls++;
        throw new Error("connection refused");
      },
      { retry: { ...fast, maxAttempts: 4 } },
    );
    const f = flow$("gives-up", async (ctx) =>
      ctx.execute(down, null).catch((e: unknown) => (e as Error).message),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "down-1" })).result();
    expect(out.output).toBe("connection refused");
    expect(calls).toBe(4);
    const failed = payloads(await r.readLog("down-1"), "STEP_FAILED");
    expect(failed.map((p) => p.retrying ?? false)).toEqual([true, true, true, false]);
    const state = await r.getState("down-1");
    expect(state.frames["down#0"]).toMatchObject({ status: "failed", attempts: 4 });
  });

  it("by default retries a 429 but not a TerminalError or a 400", async () => {
    const calls: string[] = [];
    const failing = (name: string, error: () => Error) =>
      step$(name, async () => {
        calls.push(name);
        throw error();
      });
    const badRequest = () => Object.assign(new Error("bad request"), { status: 400 });
    const rateLimited = () => Object.assign(new Error("slow down"), { status: 429 });
    const f = flow$("refusals", async (ctx) => {
      for (const [name, make] of [
        ["terminal", () => new TerminalError("no")],
        ["bad", badRequest],
        ["limited", rateLimited],
      ] as const) {
        await ctx.execute(failing(name, make), null, { retry: fast }).catch(() => undefined);
      }
      return calls;
    });
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out.output).toEqual(["terminal", "bad", "limited", "limited", "limited"]);
  });

  it("an abort is never retried, even when isRetryable says yes", async () => {
    let calls = 0;
    let asked = 0;
    const hangs = step$("hangs", async (_: null, ectx) => {
      calls++;
      await new Promise((_, reject) =>
        ectx.signal.addEventListener("abort", () => reject(new Error("aborted mid-call"))),
      );
    });
    const f = flow$("aborted", async (ctx) =>
      ctx.execute(hangs, null, {
        retry: { ...fast, maxAttempts: 10, isRetryable: () => (asked++, true) },
      }),
    );
    const r = rt(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "ab-1" });
    await until(() => calls === 1);
    await r.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(calls).toBe(1);
    expect(asked).toBe(0);
  });

  it("the backoff wait ends the moment the signal aborts", async () => {
    const controller = new AbortController();
    let calls = 0;
    const ctx = fakeContext(controller.signal);
    const chain = compose<MiddlewareContext>(
      [retryMiddleware({ initialDelayMs: 60_000, maxDelayMs: 60_000, jitter: 0 })],
      async () => {
        calls++;
        throw new Error("flaky");
      },
    );
    const t0 = Date.now();
    const settled = chain(ctx).then(
      () => "resolved",
      (e: unknown) => (e as Error).message,
    );
    await until(() => ctx.failures.length === 1);
    controller.abort(new Error("cancelled by test"));
    expect(await settled).toBe("cancelled by test");
    // Before the 60 s backoff: the abort ended it (a latency figure is a bench's job).
    expect(Date.now() - t0).toBeLessThan(60_000);
    expect(calls).toBe(1);
    expect(ctx.failures).toEqual([60_000]);
    expect(ctx.begun).toBe(0);
  });

  it("every attempt passes budget admission against what the failed ones spent", async () => {
    let calls = 0;
    const pricey = step$("pricey", async (_: null, ectx) => {
      calls++;
      ectx.meter({ tokens: { input: 30, output: 30 } });
      throw new Error("timeout");
    });
    const f = flow$(
      "capped",
      async (ctx) =>
        ctx
          .execute(pricey, null, { retry: { ...fast, maxAttempts: 5 } })
          .catch((e: unknown) => (e instanceof QuotaExceededError ? "refused" : "other")),
      { budget: { tokens: 100 } },
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "cap-1" })).result();
    expect(out.output).toBe("refused");
    expect(calls).toBe(2);
    const log = await r.readLog("cap-1");
    expect(payloads(log, "QUOTA_EXCEEDED")).toHaveLength(1);
    expect((await r.getState("cap-1"))._resources?.tokens).toEqual({ input: 60, output: 60 });
  });

  it("the attempt count survives a crash during the backoff", async () => {
    const store = memoryStore();
    const clock = offsetClock();
    const attempts: number[] = [];
    const f = flow$("survives", async (ctx) =>
      ctx.execute(
        step$("unsteady", async (_: null, ectx) => {
          attempts.push(ectx.attempt);
          throw new Error("unsteady");
        }),
        null,
        { retry: { maxAttempts: 2, initialDelayMs: 60_000 } },
      ),
    );
    const a = rt(store, { clock, leaseTtlMs: 1000, background: false, ownerId: "A" });
    a.registerFlow(f);
    await a.start(f, null, { id: "sv-1" });
    await until(async () => (await a.readLog("sv-1")).some((e) => e.kind === "STEP_FAILED"));
    await a.close();
    clock.advance(15_000); // past the lease and the (at most 10 s) backoff
    const b = rt(store.reopen(), { clock, leaseTtlMs: 1000, background: false, ownerId: "B" });
    b.registerFlow(f);
    expect(await b.recoverAbandoned()).toEqual(["sv-1"]);
    const out = await b.waitForCompletion("sv-1");
    expect(out.status).toBe("failed");
    // Attempt 2 was the last one allowed: no third attempt after the recovery.
    expect(attempts).toEqual([1, 2]);
    const state = await b.getState("sv-1");
    expect(state.frames["unsteady#0"]).toMatchObject({ status: "failed", attempts: 2 });
  });

  it("keeps the recorded backoff after a crash: the next attempt waits for it", async () => {
    const store = memoryStore();
    const clock = offsetClock();
    const f = flow$("patient", async (ctx) =>
      ctx.execute(
        step$("once-down", async (_: null, ectx) => {
          if (ectx.attempt === 1) throw new Error("down");
          return ectx.attempt;
        }),
        null,
        { retry: { initialDelayMs: 3000, jitter: 0 } },
      ),
    );
    const a = rt(store, { clock, leaseTtlMs: 1000, background: false, ownerId: "A" });
    a.registerFlow(f);
    await a.start(f, null, { id: "pt-1" });
    await until(async () => (await a.readLog("pt-1")).some((e) => e.kind === "STEP_FAILED"));
    await a.close();
    clock.advance(2000); // the lease has expired; 1 s of the backoff is left
    const b = rt(store.reopen(), { clock, leaseTtlMs: 1000, background: false, ownerId: "B" });
    b.registerFlow(f);
    expect(await b.recoverAbandoned()).toEqual(["pt-1"]);
    expect(await b.waitForCompletion("pt-1")).toEqual({ status: "completed", output: 2 });
    const log = await b.readLog("pt-1");
    const failedAt = log.find((e) => e.kind === "STEP_FAILED")?.at ?? 0;
    const restartedAt = log.find((e) => e.kind === "STEP_STARTED")?.at ?? 0;
    expect(restartedAt).toBeGreaterThanOrEqual(failedAt + 3000);
  });

  it("an undefined field keeps its default, and a throwing isRetryable does not retry", async () => {
    let calls = 0;
    const down = step$("down", async () => {
      calls++;
      throw new Error("still down");
    });
    const f = flow$("defaults", async (ctx) => {
      await ctx
        .execute(down, null, { retry: { maxAttempts: undefined, initialDelayMs: 1 } })
        .catch(() => undefined);
      const first = calls;
      const message = await ctx
        .execute(down, 1, {
          retry: {
            initialDelayMs: 1,
            isRetryable: () => {
              throw new Error("predicate bug");
            },
          },
        })
        .catch((e: unknown) => (e as Error).message);
      return { first, second: calls - first, message };
    });
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null)).result();
    expect(out.output).toEqual({ first: 3, second: 1, message: "still down" });
  });

  it("makes no further attempt once the execution has ended", async () => {
    let calls = 0;
    const flaky = step$("flaky", async () => {
      calls++;
      throw new Error("flaky");
    });
    const f = flow$("ends-early", async (ctx) =>
      ctx.parallel([
        async (c) => c.execute(flaky, null, { retry: { initialDelayMs: 200, jitter: 0 } }),
        async (c) => {
          await c.run("wait", () => new Promise((r) => setTimeout(r, 20)));
          throw new TerminalError("the flow gives up");
        },
      ]),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "ee-1" })).result();
    expect(out.status).toBe("failed");
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(calls).toBe(1);
  });

  it("waits longer than 2^31-1 ms in chunks instead of firing at once", async () => {
    vi.useFakeTimers();
    try {
      let done = false;
      const waiting = abortableDelay(3e9, new AbortController().signal).then(() => (done = true));
      await vi.advanceTimersByTimeAsync(2 ** 31);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(3e9 - 2 ** 31);
      await waiting;
      expect(done).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a retry hint and an HTTP status survive the log and a process boundary", () => {
    const hinted = errorFromData(errorToData(new RetryableError("busy", { retryAfterMs: 1500 })));
    expect(hinted).toBeInstanceOf(RetryableError);
    expect((hinted as RetryableError).retryAfterMs).toBe(1500);
    expect(defaultIsRetryable(hinted)).toBe(true);
    const p = { ...fast, maxAttempts: 3, backoffFactor: 2, jitter: 0, isRetryable: () => true };
    expect(backoffMs(p, "k", 1, hinted)).toBe(1500);
    const badRequest = Object.assign(new Error("bad"), { status: 400 });
    const recorded = errorFromData(errorToData(badRequest));
    expect(recorded.details).toEqual({ status: 400 });
    expect(defaultIsRetryable(recorded)).toBe(false);
    expect(defaultIsRetryable(errorFromData(errorToData(new Error("plain"))))).toBe(true);
  });

  it("refuses a bad retry policy before anything is recorded", async () => {
    expect(() => step$("s", async () => 1, { retry: { maxAttempts: 0 } })).toThrow(
      InvalidInputError,
    );
    expect(() => step$("s", async () => 1, { retries: 3 } as never)).toThrow(/unknown keys/);
    expect(() => retryMiddleware({ jitter: 2 })).toThrow(InvalidInputError);
    const f = flow$("bad-policy", async (ctx) =>
      ctx
        .execute(
          step$("s", async () => 1),
          null,
          { retry: { backoffFactor: -1 } },
        )
        .catch((e: unknown) => (isLoomError(e) ? e.code : "other")),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "bp-1" })).result();
    expect(out.output).toBe("LOOM_INVALID_INPUT");
    const kinds = (await r.readLog("bp-1")).map((e) => e.kind);
    expect(kinds).toEqual(["EXECUTION_STARTED", "EXECUTION_COMPLETED"]);
  });

  it("jitter is seeded: the same step and attempt wait the same, within the bounds", () => {
    const p = {
      maxAttempts: 5,
      initialDelayMs: 100,
      backoffFactor: 2,
      maxDelayMs: 1000,
      jitter: 0.5,
      isRetryable: () => true,
    };
    const waits = [1, 2, 3, 4, 5].map((attempt) => backoffMs(p, "x/s#0", attempt, null));
    expect([1, 2, 3, 4, 5].map((attempt) => backoffMs(p, "x/s#0", attempt, null))).toEqual(waits);
    [100, 200, 400, 800, 1000].forEach((cap, i) => {
      expect(waits[i]).toBeGreaterThanOrEqual(cap / 2);
      expect(waits[i]).toBeLessThanOrEqual(cap);
    });
    const others = ["a", "b", "c", "d"].map((k) => backoffMs(p, `${k}/s#0`, 3, null));
    expect(new Set(others).size).toBeGreaterThan(1);
  });
});

describe("compose with a re-running middleware", () => {
  it("re-runs the inner chain per attempt and still refuses a second next() inside it", async () => {
    const trail: string[] = [];
    const twice = rerunning<object>(async (_, next) => {
      await next().catch(() => trail.push("retry"));
      return next();
    });
    let n = 0;
    const inner: Middleware<object> = async (_, next) => {
      trail.push("inner");
      return next();
    };
    const run = compose<object>([twice, inner], async () => {
      if (n++ === 0) throw new Error("first");
      return "second";
    });
    expect(await run({})).toBe("second");
    expect(trail).toEqual(["inner", "retry", "inner"]);
    const greedy: Middleware<object> = async (_, next) => {
      await next();
      return next();
    };
    await expect(compose<object>([twice, greedy], async () => 1)({})).rejects.toThrow(
      /next\(\) was called twice/,
    );
  });
});

/** A middleware context outside a runtime, recording what retry asked the kernel to do. */
function fakeContext(signal: AbortSignal) {
  const failures: number[] = [];
  const state = { begun: 0, attempt: 1 };
  const ctx: MiddlewareContext & { failures: number[]; begun: number } = {
    executionId: "x",
    stepId: "s#0",
    get attempt() {
      return state.attempt;
    },
    idempotencyKey: "x/s#0",
    signal,
    resources: {},
    meter: () => undefined,
    effect: "s",
    options: {},
    budgets: [],
    metered: () => ({}),
    emit: () => undefined,
    now: () => Date.now(),
    invoke: async () => undefined,
    failedAttempt: async (_error, retryInMs) => void failures.push(retryInMs),
    beginAttempt: async () => {
      state.begun++;
      state.attempt++;
    },
    failures,
    get begun() {
      return state.begun;
    },
  };
  return ctx;
}
