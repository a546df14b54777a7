import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  createRuntime,
  flow$,
  fold,
  foldAll,
  initialState,
  isLoomError,
  memoryStore,
  toJson,
  type Envelope,
  type Json,
} from "../src/index.ts";
import { MAX_DEPTH } from "../src/kernel/json.ts";
import { foldOnto } from "../src/fold/fold.ts";
import type { ExecutionState } from "../src/fold/state.ts";
import { approxStateBytes } from "../src/runtime/load-state.ts";

const start: Envelope = {
  executionId: "x",
  seq: 0,
  kind: "EXECUTION_STARTED",
  at: 1,
  payload: { flow: "f", flowVersion: "1", fingerprint: "ab", input: null, schemaVersion: "1.0.0" },
};
const ev = (seq: number, kind: Envelope["kind"], payload: Json, kernel = false): Envelope => ({
  executionId: "x",
  seq,
  kind,
  at: seq + 1,
  payload,
  ...(kernel ? { meta: { kernel: true } } : {}),
});

/** A copy of `v` with every -0 made 0, as a JSON round trip makes it. */
function withoutNegativeZero(v: unknown): unknown {
  if (Object.is(v, -0)) return 0;
  if (Array.isArray(v)) return v.map(withoutNegativeZero);
  if (v !== null && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, withoutNegativeZero(x)]));
  }
  return v;
}

/** Cases per fold property (issue 5: at least 10,000 in CI). */
const RUNS = 10_000;

const kinds = [
  "EXECUTION_STARTED",
  "STEP_STARTED",
  "STEP_COMPLETED",
  "STEP_FAILED",
  "STEP_CANCELLED",
  "DECISION_RECORDED",
  "TIMER_SCHEDULED",
  "TIMER_FIRED",
  "SUSPENDED",
  "RESUMED",
  "RESOURCE_METERED",
  "QUOTA_EXCEEDED",
  "EXECUTION_COMPLETED",
  "EXECUTION_FAILED",
  "EXECUTION_CANCELLED",
  "__proto__",
  "toString",
  "NOT_A_KIND",
] as const;

const payloadArb = fc.oneof(
  fc.anything(),
  fc.record({
    callId: fc.constantFrom("a#0", "b#0", "__proto__", "", "toString", 7),
    scope: fc.constantFrom("", "par0.0/", "__proto__", 1),
    name: fc.constantFrom("a", "sleep", "suspend"),
    wakeAtMs: fc.oneof(fc.integer(), fc.constant(Number.NaN)),
    output: fc.jsonValue(),
    value: fc.jsonValue(),
    payload: fc.jsonValue(),
    error: fc.anything(),
    retrying: fc.oneof(fc.constant(true), fc.anything()),
    retryInMs: fc.oneof(fc.nat(), fc.constant(Number.NaN), fc.constant(-1)),
    startedAt: fc.oneof(fc.nat(), fc.constant(Number.NaN)),
    deadlineMs: fc.oneof(fc.nat(), fc.constant(0), fc.constant(Number.POSITIVE_INFINITY)),
    budget: fc.oneof(fc.record({ tokens: fc.nat() }), fc.anything()),
    delta: fc.oneof(
      fc.record({ tokens: fc.record({ input: fc.nat() }), wallMs: fc.nat() }),
      fc.anything(),
    ),
    budgets: fc.oneof(fc.constant(["s", "__proto__"]), fc.anything()),
    dimension: fc.constantFrom("tokens", "wallMs", "custom.x", 3),
  }),
);

const envelopeArb = fc.record({
  executionId: fc.constantFrom("x", "y"),
  seq: fc.oneof(fc.nat(30), fc.constant(-1), fc.double()),
  kind: fc.constantFrom(...kinds),
  at: fc.oneof(fc.nat(), fc.constant(Number.POSITIVE_INFINITY)),
  payload: payloadArb,
  meta: fc.option(fc.record({ kernel: fc.constant(true as const) }), { nil: undefined }),
});

/** Envelopes with dense sequence numbers, so that they are folded, not dropped for order. */
const logArb = fc
  .array(envelopeArb, { maxLength: 40 })
  .map(
    (es) =>
      [
        start,
        ...es.map((e, i) => ({ ...e, executionId: "x", seq: i + 1, at: i + 2 })),
      ] as unknown as Envelope[],
  );

describe("the fold", () => {
  it("F2: never throws, whatever it is given, and ignores the same things the same way", () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(envelopeArb, fc.anything()), { maxLength: 40 }), (es) => {
        const list = es as unknown as Envelope[];
        expect(canonicalJson(foldAll(list))).toBe(canonicalJson(foldAll(list)));
      }),
      { numRuns: RUNS },
    );
  });

  it("F2: dense logs of random, malformed payloads fold deterministically and keep JSON state", () => {
    fc.assert(
      fc.property(logArb, (log) => {
        const a = foldAll(log);
        expect(canonicalJson(a)).toBe(canonicalJson(foldAll(log)));
        expect(Object.getPrototypeOf(a.frames)).toBe(Object.prototype);
        // JSON has no -0 (stores never hand one back); anything else must survive the trip.
        expect(JSON.parse(JSON.stringify(a))).toEqual(withoutNegativeZero(a));
      }),
      { numRuns: RUNS },
    );
  });

  it("F5: a snapshot of any prefix plus the tail equals the whole fold", () => {
    fc.assert(
      fc.property(logArb, fc.nat(), (log, cut) => {
        const k = cut % log.length;
        const snapshot = { seq: k, state: foldAll(log.slice(0, k + 1)) };
        expect(canonicalJson(foldAll(log.slice(k + 1), snapshot))).toBe(
          canonicalJson(foldAll(log)),
        );
      }),
      { numRuns: RUNS },
    );
  });

  it("F5: foldOnto a snapshot's own state folds it in place to the same state, without a copy", () => {
    fc.assert(
      fc.property(logArb, fc.nat(), (log, cut) => {
        const k = cut % log.length;
        // What a store hands loadState: a parsed copy the caller owns (store S8).
        const owned = JSON.parse(JSON.stringify(foldAll(log.slice(0, k + 1)))) as ExecutionState;
        const folded = foldOnto(log.slice(k + 1), owned, "x");
        expect(folded).toBe(owned);
        expect(canonicalJson(folded)).toBe(canonicalJson(foldAll(log)));
        expect(canonicalJson(foldOnto(log, undefined))).toBe(canonicalJson(foldAll(log)));
      }),
      { numRuns: RUNS / 20 },
    );
    expect(foldOnto([], undefined, "y")).toEqual(initialState("y"));
  });

  it("a loaded state's size estimate stays near its JSON length (the parked cache's bound)", () => {
    fc.assert(
      fc.property(logArb, (log) => {
        const state = foldAll(log);
        const exact = JSON.stringify(state).length;
        const estimate = approxStateBytes(state);
        expect(estimate).toBeGreaterThanOrEqual(exact * 0.75);
        expect(estimate).toBeLessThanOrEqual(exact * 1.5 + 64);
      }),
      { numRuns: RUNS / 20 },
    );
  });

  it("F3: a terminal kind folds only from a kernel-stamped envelope", () => {
    const forged = foldAll([start, ev(1, "EXECUTION_COMPLETED", { output: "forged" })]);
    expect(forged.status).toBe("running");
    expect(forged.output).toBeUndefined();
    const real = foldAll([start, ev(1, "EXECUTION_COMPLETED", { output: "real" }, true)]);
    expect(real.status).toBe("completed");
    expect(real.output).toBe("real");
  });

  it("F4 and F6: nothing folds after a terminal event; a log must start with EXECUTION_STARTED", () => {
    const s = foldAll([
      start,
      ev(1, "EXECUTION_FAILED", { error: { name: "E", code: "X", message: "m" } }, true),
      ev(2, "STEP_STARTED", { callId: "a#0", scope: "", name: "a" }),
    ]);
    expect(s.seq).toBe(1);
    expect(s.frames).toEqual({});
    expect(foldAll([ev(0, "STEP_STARTED", { callId: "a#0", scope: "", name: "a" })]).seq).toBe(-1);
  });

  it("F7: parks while a wait is open and no step is in flight, in any scope", () => {
    const s = initialState("x");
    fold(s, start);
    fold(s, ev(1, "STEP_STARTED", { callId: "par0.1/a#0", scope: "par0.1/", name: "a" }));
    fold(
      s,
      ev(2, "TIMER_SCHEDULED", {
        callId: "par0.0/sleep#0",
        scope: "par0.0/",
        name: "sleep",
        wakeAtMs: 9,
      }),
    );
    expect(s.status).toBe("running");
    fold(s, ev(3, "STEP_COMPLETED", { callId: "par0.1/a#0", output: 1 }));
    expect(s.status).toBe("parked");
    fold(s, ev(4, "TIMER_FIRED", { callId: "par0.0/sleep#0" }));
    expect(s.status).toBe("running");
    fold(s, ev(5, "SUSPENDED", { callId: "suspend#0", scope: "", name: "suspend" }));
    expect(s.status).toBe("parked");
    fold(s, ev(6, "RESUMED", { payload: "hi" }));
    expect(s.status).toBe("running");
    expect(s.frames["suspend#0"]).toMatchObject({ status: "resumed", output: "hi" });
  });

  it("F6: a later EXECUTION_STARTED is ignored without stopping the log", () => {
    const s = foldAll([
      start,
      ev(1, "EXECUTION_STARTED", { flow: "other" }),
      ev(2, "STEP_STARTED", { callId: "a#0", scope: "", name: "a" }),
    ]);
    expect(s.flow).toBe("f");
    expect(s.status).toBe("running");
    expect(s.seq).toBe(2);
  });
});

describe("the fold: regressions found by its property tests", () => {
  it("a -0 never enters the log from the runtime: toJson makes it 0", () => {
    const j = toJson({ n: -0, list: [-0] }, "x") as { n: number; list: number[] };
    expect(Object.is(j.n, 0)).toBe(true);
    expect(Object.is(j.list[0], 0)).toBe(true);
  });

  it("a value nested deeper than MAX_DEPTH is refused with a typed error, not a stack overflow, before anything is recorded", async () => {
    const nest = (n: number): unknown => {
      let v: unknown = 1;
      for (let i = 0; i < n; i++) v = [v];
      return v;
    };
    expect(toJson(nest(MAX_DEPTH), "x")).toBeDefined();
    for (const n of [MAX_DEPTH + 1, 5_000, 100_000]) {
      const refused = (() => {
        try {
          return toJson(nest(n), "the input");
        } catch (e) {
          return e;
        }
      })();
      expect(isLoomError(refused, "LOOM_INVALID_INPUT"), String(n)).toBe(true);
    }
    const store = memoryStore();
    const r = createRuntime({ store, background: false });
    const f = flow$("deep", async () => 1);
    const started = await r.start(f, nest(5_000), { id: "deep" }).catch((e: unknown) => e);
    expect(isLoomError(started, "LOOM_INVALID_INPUT")).toBe(true);
    expect(await store.head("deep")).toBe(-1);
    await r.close();
  });

  it("a -0 in a payload (seed 259656277) folds to state that survives a JSON round trip", () => {
    const log = [start, ev(1, "RESUMED", { payload: -0, callId: "a#0", retryInMs: Number.NaN })];
    const a = foldAll(log);
    expect(JSON.parse(JSON.stringify(a))).toEqual(withoutNegativeZero(a));
    expect(canonicalJson(a)).toBe(canonicalJson(JSON.parse(JSON.stringify(a))));
  });
});
