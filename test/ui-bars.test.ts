import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  foldAll,
  memoryStore,
  step$,
  type Envelope,
  type EventKind,
  type ExecutionState,
  type Json,
  isTerminalStatus,
} from "../src/index.ts";
import { executionBars } from "../src/analytics/bars.ts";
import { resourceUsage } from "../src/analytics/resource-usage.ts";

/** A log written by hand: each entry [kind, at, payload, kernel?], sequence numbers from 0. */
function log(entries: [EventKind, number, Json, boolean?][], id = "x"): Envelope[] {
  return entries.map(([kind, at, payload, kernel], seq) => ({
    executionId: id,
    seq,
    kind,
    at,
    payload,
    ...(kernel ? { meta: { kernel: true } } : {}),
  }));
}

const started: [EventKind, number, Json] = [
  "EXECUTION_STARTED",
  1000,
  { flow: "f", flowVersion: "1", fingerprint: "fp", schemaVersion: "1.8.0" },
];
const call = (callId: string, name = callId.split("#")[0] ?? callId) => ({
  callId,
  scope: "",
  name,
});

describe("executionBars (analytics/bars.ts)", () => {
  it("V1: a real flow's three steps are three step bars, in order, each ended", async () => {
    const runtime = createRuntime({ store: memoryStore(), background: false });
    const f = flow$("three", async (ctx) => {
      await ctx.run("a", async () => 1);
      await ctx.run("b", () => new Promise((r) => setTimeout(() => r(2), 20)));
      await ctx.run("c", async () => 3);
    });
    await (await runtime.start(f, null, { id: "t" })).result();
    const events = await runtime.readLog("t");
    const view = executionBars(events, await runtime.getState("t"));
    await runtime.close();
    expect(view.bars.map((b) => [b.name, b.kind, b.status])).toEqual([
      ["a", "step", "completed"],
      ["b", "step", "completed"],
      ["c", "step", "completed"],
    ]);
    expect(view.t0Ms).toBe(events[0]?.at);
    expect(view.markers).toEqual([]);
    expect(view.partial).toBe(false);
    for (const b of view.bars) {
      expect(b.endMs).not.toBeNull();
      expect(b.endMs ?? -1).toBeGreaterThanOrEqual(b.startMs);
    }
    const b = view.bars[1];
    expect((b?.endMs ?? 0) - (b?.startMs ?? 0)).toBeGreaterThanOrEqual(15);
  });

  it("V1: a fast step starts at its recorded startedAt; a retried step is one bar with its attempts", () => {
    const view = executionBars(
      log([
        started,
        ["STEP_COMPLETED", 1040, { ...call("fast#0"), startedAt: 1030, output: 1 }],
        ["STEP_STARTED", 1050, call("flaky#0")],
        [
          "STEP_FAILED",
          1060,
          { ...call("flaky#0"), error: { message: "no" }, retrying: true, retryInMs: 10 },
        ],
        ["STEP_STARTED", 1070, call("flaky#0")],
        ["STEP_COMPLETED", 1090, { callId: "flaky#0", output: 2 }],
      ]),
    );
    expect(view.bars).toEqual([
      {
        callId: "fast#0",
        name: "fast",
        scope: "",
        kind: "step",
        startMs: 30,
        endMs: 40,
        status: "completed",
        attempts: 1,
      },
      {
        callId: "flaky#0",
        name: "flaky",
        scope: "",
        kind: "step",
        startMs: 50,
        endMs: 90,
        status: "completed",
        attempts: 2,
      },
    ]);
    expect(view.lastMs).toBe(90);
  });

  it("V1, V2: sleeps and suspends are wait bars; an open one has endMs null while the execution lives", () => {
    const events = log([
      started,
      ["TIMER_SCHEDULED", 1010, { ...call("sleep#0", "sleep"), wakeAtMs: 2010 }],
      ["TIMER_FIRED", 2010, { callId: "sleep#0" }],
      ["SUSPENDED", 2020, { ...call("suspend#0", "suspend"), wakeAtMs: 9000 }],
    ]);
    const view = executionBars(events);
    expect(view.bars.map((b) => [b.kind, b.status, b.startMs, b.endMs, b.wakeMs])).toEqual([
      ["sleep", "fired", 10, 1010, 1010],
      ["suspend", "waiting", 1020, null, 8000],
    ]);
    // A resume settles it.
    const resumed = executionBars([
      ...events,
      { executionId: "x", seq: 4, kind: "RESUMED", at: 2500, payload: { payload: 1 } },
    ]);
    expect(resumed.bars[1]).toMatchObject({ status: "resumed", endMs: 1500 });
  });

  it("V2, V3: a cancel ends open bars as `ended` and marks STEP_CANCELLED and EXECUTION_CANCELLED", () => {
    const view = executionBars(
      log([
        started,
        ["SUSPENDED", 1010, call("suspend#0", "suspend")],
        ["STEP_STARTED", 1020, call("work#0")],
        ["STEP_CANCELLED", 1500, { callId: "work#0", error: { message: "cancelled" } }],
        ["EXECUTION_CANCELLED", 1500, { reason: "user", error: { message: "cancelled" } }, true],
      ]),
    );
    expect(view.bars.map((b) => [b.name, b.status, b.endMs])).toEqual([
      ["suspend", "ended", 500],
      ["work", "cancelled", 500],
    ]);
    expect(view.markers.map((m) => [m.kind, m.seq, m.atMs, m.callId])).toEqual([
      ["STEP_CANCELLED", 3, 500, "work#0"],
      ["EXECUTION_CANCELLED", 4, 500, undefined],
    ]);
    expect(view.markers[1]?.text).toBe("cancelled: user");
  });

  it("V3: an app event named EXECUTION_CANCELLED is no marker; QUOTA_EXCEEDED is", () => {
    const view = executionBars(
      log([
        started,
        ["EXECUTION_CANCELLED", 1010, { reason: "forged" }],
        ["QUOTA_EXCEEDED", 1020, { callId: "llm#0", dimension: "tokens", budget: "execution" }],
      ]),
    );
    expect(view.markers.map((m) => m.kind)).toEqual(["QUOTA_EXCEEDED"]);
    expect(view.markers[0]?.text).toContain("tokens");
  });

  it("V3: a real budget refusal is a QUOTA_EXCEEDED marker, and the usage row is exceeded", async () => {
    const runtime = createRuntime({ store: memoryStore(), background: false });
    const llm = step$("llm", async (_: null, ectx) => {
      ectx.meter({ tokens: { input: 4, output: 4 } });
      return "ok";
    });
    const f = flow$(
      "spender",
      async (ctx) => {
        await ctx.execute(llm, null);
        await ctx.execute(llm, null);
      },
      { budget: { tokens: 8 } },
    );
    const outcome = await (await runtime.start(f, null, { id: "q" })).result();
    const state = await runtime.getState("q");
    const view = executionBars(await runtime.readLog("q"), state);
    await runtime.close();
    expect(outcome.status).toBe("failed");
    expect(view.markers.map((m) => m.kind)).toEqual(["QUOTA_EXCEEDED"]);
    const [execution] = resourceUsage(state);
    const tokens = execution?.rows.find((r) => r.dimension === "tokens");
    expect(tokens).toMatchObject({ spent: 8, limit: 8, fraction: 1, exceeded: true });
    expect(tokens?.tokens).toEqual({ input: 4, output: 4 });
  });

  it("V4: a compacted log is folded to its gap; the state's other frames are compacted bars", () => {
    const whole = log([
      started,
      ["STEP_COMPLETED", 1010, { ...call("a#0"), startedAt: 1005, output: 1 }],
      ["STEP_COMPLETED", 1020, { ...call("b#0"), startedAt: 1015, output: 2 }],
      ["STEP_STARTED", 1030, call("c#0")],
    ]);
    const state = foldAll(whole);
    const gapped = [whole[0], whole[3]] as Envelope[];
    const view = executionBars(gapped, state);
    expect(view.partial).toBe(true);
    expect(view.lastMs).toBe(30);
    expect(view.bars.map((b) => [b.name, b.compacted, b.endMs])).toEqual([
      ["a", true, 5],
      ["b", true, 15],
      ["c", true, null],
    ]);
  });

  it("V5: never throws on malformed logs", () => {
    const junk = [
      null,
      42,
      { seq: 0 },
      { seq: 0, kind: "STEP_STARTED", at: 1, payload: null },
      { executionId: "x", seq: 0, kind: "EXECUTION_STARTED", at: "soon", payload: {} },
      { executionId: "x", seq: 0, kind: "EXECUTION_STARTED", at: 5, payload: [] },
      { executionId: "x", seq: 1, kind: "STEP_COMPLETED", at: 6, payload: { callId: 3 } },
    ] as unknown as Envelope[];
    for (let i = 0; i < junk.length; i++) {
      expect(() => executionBars(junk.slice(i))).not.toThrow();
    }
    expect(executionBars([])).toEqual({
      t0Ms: 0,
      lastMs: 0,
      bars: [],
      markers: [],
      partial: false,
    });
  });
});

const KINDS: EventKind[] = [
  "STEP_STARTED",
  "STEP_COMPLETED",
  "STEP_FAILED",
  "STEP_CANCELLED",
  "TIMER_SCHEDULED",
  "TIMER_FIRED",
  "SUSPENDED",
  "RESUMED",
  "QUOTA_EXCEEDED",
  "EXECUTION_CANCELLED",
  "EXECUTION_COMPLETED",
];

const payloadArb = fc.oneof(
  fc.anything(),
  fc.record({
    callId: fc.constantFrom("a#0", "b#0", "__proto__", ""),
    scope: fc.constant(""),
    name: fc.constantFrom("a", "b", "receive", "awaitChild"),
    wakeAtMs: fc.nat(5000),
    startedAt: fc.oneof(fc.nat(5000), fc.constant(Number.NaN)),
    retrying: fc.boolean(),
    retryInMs: fc.nat(100),
    dimension: fc.constantFrom("tokens", 3),
  }),
);

describe("executionBars, random logs", () => {
  it("V2, V5: never throws; one bar per call; no open bar once the execution has ended", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            kind: fc.constantFrom(...KINDS),
            payload: payloadArb,
            kernel: fc.boolean(),
          }),
          { maxLength: 30 },
        ),
        (entries) => {
          const events = log([
            started,
            ...entries.map(
              (e, i) =>
                [e.kind, 1001 + i, e.payload as Json, e.kernel] as [
                  EventKind,
                  number,
                  Json,
                  boolean,
                ],
            ),
          ]);
          const view = executionBars(events, foldAll(events));
          const ids = view.bars.map((b) => b.callId);
          expect(new Set(ids).size).toBe(ids.length);
          if (isTerminalStatus(foldAll(events).status)) {
            expect(view.bars.filter((b) => b.endMs === null)).toEqual([]);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("resourceUsage (analytics/resource-usage.ts)", () => {
  const base = foldAll(log([started]));

  it("U1: no row for a dimension never spent nor limited", () => {
    expect(resourceUsage(base)).toEqual([{ budget: "execution", rows: [] }]);
  });

  it("U1..U4: rows in order, limits and fractions, nested budgets, held grants, the exceeded one", () => {
    const state: ExecutionState = {
      ...base,
      _budget: { tokens: 100, costUsd: 2, custom: { calls: 10 } },
      _resources: { tokens: { input: 30, output: 20 }, wallMs: 500, costUsd: 0.5 },
      _scopeResources: { research: { tokens: { input: 5 }, custom: { calls: 3 } } },
      _quotaExceeded: { dimension: "tokens", budget: "research" },
      _children: {
        "x::kid#0": {
          callId: "spawn#0",
          flow: "kid",
          detached: false,
          budget: { costUsd: 1 },
          granted: true,
        },
      },
    };
    const [execution, research] = resourceUsage(state);
    expect(execution?.rows).toEqual([
      {
        dimension: "tokens",
        spent: 50,
        tokens: { input: 30, output: 20 },
        limit: 100,
        fraction: 0.5,
      },
      { dimension: "costUsd", spent: 0.5, held: 1, limit: 2, fraction: 0.75 },
      { dimension: "wallMs", spent: 500 },
      { dimension: "custom.calls", spent: 0, limit: 10, fraction: 0 },
    ]);
    expect(research).toEqual({
      budget: "research",
      rows: [
        { dimension: "tokens", spent: 5, tokens: { input: 5, output: 0 }, exceeded: true },
        { dimension: "custom.calls", spent: 3 },
      ],
    });
  });
});
