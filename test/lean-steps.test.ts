/**
 * Schema 1.11.0 (issue 23 item 3): step events leave out what their call id and their time give
 * (fold/steps.ts S5), and fold to the state the full form gave.
 */
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  createRuntime,
  flow$,
  foldAll,
  memoryStore,
  type Envelope,
  type Json,
} from "../src/index.ts";
import { stepHeadOf } from "../src/fold/steps.ts";
import { stepDetail } from "../src/analytics/step-detail.ts";

const ev = (seq: number, kind: Envelope["kind"], payload: Json, at = 100 + seq): Envelope => ({
  executionId: "x",
  seq,
  kind,
  at,
  payload,
  meta: { fence: 1 },
});

const start = ev(0, "EXECUTION_STARTED", {
  flow: "f",
  flowVersion: "1",
  fingerprint: "ab",
  input: null,
  schemaVersion: "1.11.0",
});

describe("schema 1.11.0: lean step events", () => {
  it("S5: the scope and name a call id gives", () => {
    expect(stepHeadOf("s#0")).toEqual({ scope: "", name: "s" });
    expect(stepHeadOf("par0.1/llm#12")).toEqual({ scope: "par0.1/", name: "llm" });
    expect(stepHeadOf("a/b/c#1")).toEqual({ scope: "a/b/", name: "c" });
    expect(stepHeadOf("#0")).toBeUndefined();
    expect(stepHeadOf("p/#0")).toBeUndefined();
    expect(stepHeadOf("nohash")).toBeUndefined();
  });

  it("S5: a step's events without scope, name or a startedAt equal to their time fold as the full ones do", () => {
    const full = [
      start,
      ev(1, "STEP_COMPLETED", { callId: "a#0", scope: "", name: "a", startedAt: 101, output: 1 }),
      ev(2, "STEP_STARTED", {
        callId: "par0.0/b#0",
        scope: "par0.0/",
        name: "b",
        input: 2,
        startedAt: 102,
      }),
      ev(3, "STEP_FAILED", {
        callId: "par0.0/b#0",
        error: { name: "Error", message: "no" },
        retrying: true,
        retryInMs: 5,
      }),
      ev(4, "STEP_STARTED", { callId: "par0.0/b#0", scope: "par0.0/", name: "b", input: 2 }),
      ev(5, "STEP_COMPLETED", { callId: "par0.0/b#0", output: 3 }),
      ev(6, "STEP_FAILED", {
        callId: "c#0",
        scope: "",
        name: "c",
        startedAt: 106,
        error: { name: "Error", message: "x" },
      }),
    ];
    const lean = [
      start,
      ev(1, "STEP_COMPLETED", { callId: "a#0", output: 1 }),
      ev(2, "STEP_STARTED", { callId: "par0.0/b#0", input: 2 }),
      full[3] as Envelope,
      ev(4, "STEP_STARTED", { callId: "par0.0/b#0", input: 2 }),
      full[5] as Envelope,
      ev(6, "STEP_FAILED", { callId: "c#0", error: { name: "Error", message: "x" } }),
    ];
    const state = foldAll(lean);
    expect(canonicalJson(state)).toBe(canonicalJson(foldAll(full)));
    expect(state.frames["par0.0/b#0"]).toMatchObject({ scope: "par0.0/", name: "b", attempts: 2 });
    expect(state.order["par0.0/"]).toEqual(["step:par0.0/b#0"]);
  });

  it("a step event that gives its scope or name keeps them, even when its call id says otherwise", () => {
    const state = foldAll([
      start,
      ev(1, "STEP_COMPLETED", { callId: "a#0", scope: "", name: "other", output: 1 }),
    ]);
    expect(state.frames["a#0"]).toMatchObject({ scope: "", name: "other" });
  });

  it("the runtime writes a step's events without scope and name, and without a startedAt that is their time", async () => {
    const f = flow$("lean", async (ctx) => {
      const a = await ctx.run("a", () => 1);
      const [b] = await ctx.parallel([async (c) => c.run("b", () => 2)]);
      return a + (b ?? 0);
    });
    const fixed = { now: () => 1_000 };
    const runtime = createRuntime({ store: memoryStore(), clock: fixed });
    const h = await runtime.start(f, null, { id: "lean-1" });
    expect((await h.result()).output).toBe(3);
    const steps = (await runtime.readLog("lean-1")).filter((e) => e.kind.startsWith("STEP_"));
    expect(steps.map((e) => e.payload)).toEqual([
      { callId: "a#0", output: 1 },
      { callId: "par0.0/b#0", output: 2 },
    ]);
    await runtime.close();
    // A clock that moves between a step's start and its end keeps `startedAt`.
    let t = 0;
    const moving = createRuntime({ store: memoryStore(), clock: { now: () => (t += 5) } });
    await (await moving.start(f, null, { id: "lean-2" })).result();
    const first = (await moving.readLog("lean-2")).find((e) => e.kind === "STEP_COMPLETED");
    const started = (first?.payload as { startedAt?: number }).startedAt;
    expect(started).toBeLessThan(first?.at ?? 0);
    // What shows the call reads that start (its value alone is kept: fold/settled.ts L1, L2).
    const log = await moving.readLog("lean-2");
    const detail = stepDetail(log, await moving.getState("lean-2"), "a#0");
    expect(detail?.startedAtMs).toBe(started);
    await moving.close();
  });
});
