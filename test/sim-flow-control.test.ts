/**
 * The simulator's flow-control invariants (issue 26): SIM17 (queues, sim/queue-invariants.ts) and
 * SIM18 (rate limiters, sim/limiter-invariants.ts) report hand-made logs and attempts that break
 * them, pass ones that keep them, and each catches a deliberately broken store on a seed (an
 * admission that ignores the per-key limit, a reservation counted in a 1 ms window). The seeds
 * themselves run in test/sim.test.ts.
 */
import { describe, expect, it } from "vitest";
import type { Envelope, EventKind, Json } from "../src/index.ts";
import { checkQueues, ranUnadmitted } from "../sim/queue-invariants.ts";
import { checkLimiters, FlowTape, type Attempt } from "../sim/limiter-invariants.ts";
import { flowControlOf } from "../sim/flow-control.ts";
import { runSeed } from "../sim/simulator.ts";
import type { FaultRates } from "../sim/faulty-store.ts";
import type { RateLimit } from "../src/store/spi.ts";

const KERNEL = new Set<EventKind>([
  "EXECUTION_ADMITTED",
  "START_DEBOUNCED",
  "EXECUTION_COMPLETED",
  "EXECUTION_CONTINUED",
  "EXECUTION_CANCELLED",
  "EXECUTION_FAILED",
]);
function ev(id: string, seq: number, kind: EventKind, at: number, payload: Json = {}): Envelope {
  return {
    executionId: id,
    seq,
    kind,
    at,
    payload,
    meta: KERNEL.has(kind) ? { kernel: true } : {},
  };
}
const base = { flow: "sim", flowVersion: "1", fingerprint: "f", schemaVersion: "1.12.0" };
const started = (id: string, at: number, queue: { [k: string]: Json }, more = {}) =>
  ev(id, 0, "EXECUTION_STARTED", at, { ...base, queue: { priority: 0, ...queue }, ...more });
/** An execution of queue q, key k: recorded at `from`, admitted at `admitted`, done at `done`. */
const queued = (id: string, from: number, admitted: number, done: number, key = "k") => [
  started(id, from, { name: "q", key }),
  ev(id, 1, "EXECUTION_ADMITTED", admitted, { queue: "q", waitedMs: admitted - from }),
  ev(id, 2, "STEP_STARTED", admitted, { callId: "work#0" }),
  ev(id, 3, "EXECUTION_COMPLETED", done, { output: 1 }),
];

function queueViolations(
  logs: Record<string, Envelope[]>,
  limits = { concurrency: 1, keyConcurrency: 1 },
): string[] {
  const out: string[] = [];
  checkQueues(new Map(Object.entries(logs)), { q: limits }, 10_000, out);
  return out;
}

describe("the queues' invariant reports a queue past its limits (SIM17)", () => {
  it("passes slots taken in turn, a chain that keeps its slot, and a fork the operator admitted", () => {
    const a = [...queued("a", 0, 10, 30).slice(0, 3), ev("a", 3, "EXECUTION_CONTINUED", 30, {})];
    // QF4: the successor starts (admitted already) before its predecessor ends: one slot.
    const a1 = [
      started(
        "a~1",
        28,
        { name: "q", key: "k", admittedAt: 10 },
        { chainId: "a", generation: 1, continuedFrom: { executionId: "a", carried: {} } },
      ),
      ev("a~1", 1, "EXECUTION_COMPLETED", 50, { output: 1 }),
    ];
    // A fork of an admitted execution runs at once (docs/flow-control.md): not the queue's act.
    const copy = { forkedFrom: { executionId: "b", seq: 1 } };
    const fork: Envelope[] = queued("b", 5, 50, 60)
      .slice(0, 2)
      .map((e) => ({ ...e, executionId: "f", meta: { ...e.meta, ...copy } }));
    fork.push(ev("f", 2, "STEP_STARTED", 52, { callId: "work#0" }));
    const logs = { a, "a~1": a1, b: queued("b", 5, 50, 60), f: fork };
    expect(queueViolations(logs)).toEqual([]);
    // A cancel while it waited: no admission, no slot.
    const c = [started("c", 1, { name: "q", key: "k" }), ev("c", 1, "EXECUTION_CANCELLED", 40)];
    expect(queueViolations({ ...logs, c })).toEqual([]);
  });

  it("(a) reports more slots held than the queue's concurrency, or than a key's", () => {
    const logs = { a: queued("a", 0, 10, 30), b: queued("b", 5, 20, 40, "other") };
    expect(queueViolations(logs)).toEqual(["SIM17 queue q: 2 hold a slot at 20, limit 1 (a, b)"]);
    expect(queueViolations(logs, { concurrency: 2, keyConcurrency: 1 })).toEqual([]);
    const sameKey = { a: queued("a", 0, 10, 30), b: queued("b", 5, 20, 40) };
    expect(queueViolations(sameKey, { concurrency: 2, keyConcurrency: 1 })).toEqual([
      "SIM17 queue q key k: 2 hold a slot at 20, limit 1 (a, b)",
    ]);
    // A chain's successor keeps its slot until it ends: another admitted before then is one too many.
    const a = [...queued("a", 0, 10, 30).slice(0, 3), ev("a", 3, "EXECUTION_CONTINUED", 30, {})];
    const a1 = [
      started(
        "a~1",
        28,
        { name: "q", key: "k", admittedAt: 10 },
        { chainId: "a", generation: 1, continuedFrom: { executionId: "a", carried: {} } },
      ),
      ev("a~1", 1, "EXECUTION_COMPLETED", 50, { output: 1 }),
    ];
    expect(queueViolations({ a, "a~1": a1, b: queued("b", 5, 40, 60, "other") })).toEqual([
      "SIM17 queue q: 2 hold a slot at 40, limit 1 (a, b)",
    ]);
  });

  it("(b) reports an execution admitted twice, or before its debounce's time", () => {
    const twice = [
      ...queued("a", 0, 10, 30).slice(0, 2),
      ev("a", 2, "EXECUTION_ADMITTED", 12, { queue: "q", waitedMs: 12 }),
      ev("a", 3, "EXECUTION_COMPLETED", 30, { output: 1 }),
    ];
    expect(queueViolations({ a: twice })).toEqual(["SIM17 a: admitted 2 times (at 1, 2)"]);
    const early = [
      started("a", 0, { name: "q", key: "k", notBeforeMs: 5 }),
      ev("a", 1, "START_DEBOUNCED", 3, { input: 2, notBeforeMs: 20 }),
      ev("a", 2, "EXECUTION_ADMITTED", 15, { queue: "q", waitedMs: 15 }),
    ];
    expect(queueViolations({ a: early })).toEqual([
      "SIM17 a: admitted at 15, before its notBeforeMs 20",
    ]);
  });

  it("(c) reports a body that ran before its admission, or ended without one", () => {
    const [start, admitted, step, done] = queued("a", 0, 10, 30) as [
      Envelope,
      Envelope,
      Envelope,
      Envelope,
    ];
    const first = [start, { ...step, seq: 1 }, { ...admitted, seq: 2 }, done];
    expect(queueViolations({ a: first })).toEqual([
      "SIM17 a: STEP_STARTED at 1 before its admission",
    ]);
    const never = [start, { ...done, seq: 1 }];
    expect(queueViolations({ a: never })).toEqual([
      "SIM17 a: EXECUTION_COMPLETED at 1 before its admission",
    ]);
    // As an effect starts (the simulator's world): queued and not admitted yet.
    expect(ranUnadmitted([start])).toBe(true);
    expect(ranUnadmitted([start, admitted])).toBe(false);
    expect(ranUnadmitted([ev("b", 0, "EXECUTION_STARTED", 0, base)])).toBe(false);
  });
});

describe("the limiters' invariant reports calls past a limit (SIM18)", () => {
  const limit: RateLimit = { windowMs: 1000, requests: 2, outputTokens: 50, concurrent: 1 };
  const call = (n: number, outputTokens = 10) => ({
    limiter: "llm",
    executionId: `e${n}`,
    stepId: "work#0",
    attempt: 1,
    inputTokens: 5,
    outputTokens,
  });
  /** An attempt granted at `atMs`, running from `startMs` to `endMs`, settled at its end. */
  const attempt = (n: number, atMs: number, endMs: number, more: Partial<Attempt> = {}) => ({
    call: call(n),
    id: `e${n}/work#0/1`,
    startMs: atMs + 2,
    endMs,
    grant: { atMs, holdUntilMs: atMs + 5000, settledAtMs: endMs },
    ...more,
  });
  const violations = (attempts: Attempt[], l: RateLimit = limit) => {
    const out: string[] = [];
    checkLimiters(attempts, { llm: l }, 100_000, out);
    return out;
  };

  it("passes calls in turn, each window within the limits, counted at their starts and grants", () => {
    // The third is granted as the first leaves the window (0, 1000], and starts as the first's
    // start leaves (2, 1002].
    expect(violations([attempt(1, 0, 100), attempt(2, 500, 600), attempt(3, 1000, 1100)])).toEqual(
      [],
    );
  });

  it("(a) reports a call that ran without a grant", () => {
    const tape = new FlowTape(() => 7);
    const ask = { executionId: "e1", requests: 1, inputTokens: 5, outputTokens: 10 };
    const waits = { holdUntilMs: 500, waitUntilMs: 3000 };
    const granted = { granted: true as const };
    tape.reserved("llm", { ...ask, id: "e1/work#0/1/p0@7", ...waits }, 7, granted);
    tape.reserved("llm", { ...ask, id: "e2/work#0/1/p0@7", ...waits }, 7, {
      granted: false,
      retryAtMs: 100,
      position: 0,
    });
    tape.begin(call(1))();
    tape.begin(call(2))();
    // A re-run of e1's attempt 1 (after a crash) with no grant of its own rides on the first's.
    tape.begin(call(1))();
    expect(tape.refused).toBe(1);
    expect(violations(tape.attempts)).toEqual([
      "SIM18 e2: e2/work#0/1 called llm without a grant",
      "SIM18 e1: e1/work#0/1 called llm without a grant",
    ]);
    // With a grant of its own (RL9: another process, or a later first ask), it is one more call.
    tape.reserved("llm", { ...ask, id: "e1/work#0/1/p1@9", ...waits }, 9, granted);
    tape.begin(call(1))();
    expect(tape.attempts.map((a) => a.grant?.atMs)).toEqual([7, undefined, undefined, 9]);
  });

  it("(b) reports a window past its requests, or past its tokens", () => {
    expect(violations([attempt(1, 0, 100), attempt(2, 500, 600), attempt(3, 999, 1100)])).toEqual([
      "SIM18 llm: 3 requests in the 1000 ms window ending at 1001 (at their starts), limit 2 (e1/work#0/1@2, e2/work#0/1@502, e3/work#0/1@1001)",
      "SIM18 llm: 3 requests in the 1000 ms window ending at 999 (at their grants), limit 2 (e1/work#0/1@0, e2/work#0/1@500, e3/work#0/1@999)",
    ]);
    // Counted where the provider counts them, at their starts, alone.
    const late = { ...attempt(3, 1000, 1100), startMs: 1001 };
    expect(violations([attempt(1, 0, 100), attempt(2, 500, 600), late])).toEqual([
      "SIM18 llm: 3 requests in the 1000 ms window ending at 1001 (at their starts), limit 2 (e1/work#0/1@2, e2/work#0/1@502, e3/work#0/1@1001)",
    ]);
    const big = { ...attempt(2, 500, 600), call: call(2, 45) };
    expect(violations([attempt(1, 0, 100), big])).toEqual([
      "SIM18 llm: 55 outputTokens in the 1000 ms window ending at 502 (at their starts), limit 50 (e1/work#0/1@2, e2/work#0/1@502)",
      "SIM18 llm: 55 outputTokens in the 1000 ms window ending at 500 (at their grants), limit 50 (e1/work#0/1@0, e2/work#0/1@500)",
    ]);
  });

  it("(c) reports calls in flight past concurrent, a crashed call's counting until its hold", () => {
    const overlap = [attempt(1, 0, 300), attempt(2, 200, 400)];
    expect(violations(overlap)).toEqual([
      "SIM18 llm: 2 calls in flight at 202, concurrent 1 (e1/work#0/1, e2/work#0/1)",
    ]);
    // The first's process died at 100, mid-call: never settled, its slot is held until 800.
    const crashed = attempt(1, 0, 100, {
      grant: { atMs: 0, holdUntilMs: 800 },
    });
    const wide = { ...limit, requests: 9 };
    expect(violations([crashed, attempt(2, 1000, 1100)], wide)).toEqual([]);
    expect(violations([crashed, attempt(2, 700, 900)], wide)).toEqual([
      "SIM18 llm: 2 calls in flight at 702, concurrent 1 (e1/work#0/1, e2/work#0/1)",
    ]);
  });
});

describe("the simulator catches a broken flow-control store", () => {
  it("draws flow control for about 3 seeds in 5, unless told", () => {
    const drawn = Array.from({ length: 200 }, (_, i) => flowControlOf(i + 1));
    const on = drawn.filter((c) => c.enabled);
    expect(on.length).toBeGreaterThan(90);
    expect(on.length).toBeLessThan(150);
    for (const c of on) {
      expect(Object.values(c.queues).every((q) => q.keyConcurrency === 1)).toBe(true);
      expect(Object.values(c.rateLimits).every((l) => l.concurrent !== undefined)).toBe(true);
    }
    expect(flowControlOf(drawn.findIndex((c) => c.enabled) + 1, false).enabled).toBe(false);
  });

  /** The first seed from 1 on which `faults` break the invariant `prefix` names, or undefined. */
  async function caughtBy(faults: Partial<FaultRates>, prefix: string, seeds: number) {
    for (let seed = 1; seed <= seeds; seed++) {
      const r = await runSeed(seed, { flowControl: true, faults });
      const v = r.violations.find((x) => x.startsWith(prefix));
      if (v !== undefined) return { seed, v };
    }
    return undefined;
  }

  it("SIM17: an admission that ignores the queue's keyConcurrency", async () => {
    const caught = await caughtBy({ ignoreKeyConcurrency: 1 }, "SIM17 queue", 20);
    expect(caught?.v).toMatch(/^SIM17 queue q\d key k\d: 2 hold a slot at \d+, limit 1/);
  });

  it("SIM18: a reservation counted in a window of 1 ms", async () => {
    const caught = await caughtBy({ ignoreWindow: 1 }, "SIM18 llm", 60);
    expect(caught?.v).toMatch(
      /^SIM18 llm\d: \d+ \w+ in the \d+ ms window ending at \d+ \(at their \w+\), limit/,
    );
  });
});
