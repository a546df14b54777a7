/**
 * Schema 1.13.0 (issue 28): a generation keeps a plainly settled call by its value alone
 * (fold/settled.ts L1..L5). Each test cites the invariant it checks. "Legacy" is the same log
 * with its start recording schema 1.12.0: it folds every call to a frame, as before.
 */
import { describe, expect, it } from "vitest";
import {
  callFrame,
  callsOf,
  canonicalJson,
  createRuntime,
  flow$,
  foldAll,
  isLoomError,
  memoryStore,
  step$,
  type Envelope,
  type ExecutionState,
  type Json,
} from "../src/index.ts";
import { stepDetail } from "../src/analytics/step-detail.ts";
import { executionBars } from "../src/analytics/bars.ts";
import { redactedState } from "../src/runtime/erase-redacted.ts";
import { runtimes, until } from "./helpers.ts";
import { asLegacy, replayView } from "./support/lean.ts";

const rt = runtimes();

/** The conversation loop: a suspend and a step per turn. */
const chat = (ran: { n: number }) =>
  flow$("chat", async (ctx) => {
    const heard: string[] = [];
    for (;;) {
      const msg = await ctx.suspend<string>();
      if (msg === "bye") return heard;
      heard.push(
        await ctx.run("turn", () => {
          ran.n++;
          return `re: ${msg}`;
        }),
      );
    }
  });

async function talk(
  turns: number,
  opts: { cache?: { maxExecutions: number } } = {},
  store = memoryStore(),
) {
  const ran = { n: 0 };
  const r = rt(store, opts).registerFlow(chat(ran));
  await r.start("chat", null, { id: "c" });
  for (let t = 0; t < turns; t++) {
    await r.resume("c", `m${t}`);
    await until(async () => (await r.getState("c")).status === "parked");
  }
  return { r, store, ran };
}

describe("lean generations (fold/settled.ts)", () => {
  it("L1: a plainly settled step and suspend keep their value alone, and no frame", async () => {
    const { r } = await talk(30);
    const state = await r.getState("c");
    // The one frame left is the suspend still waiting; 30 turns are values.
    expect(Object.keys(state.frames)).toEqual(["suspend#30"]);
    expect(Object.keys(state._settled?.step ?? {})).toHaveLength(30);
    expect(Object.keys(state._settled?.suspend ?? {})).toHaveLength(30);
    expect(state._settled?.step?.["turn#7"]).toBe("re: m7");
    expect(state._settled?.suspend?.["suspend#7"]).toBe("m7");
    // What a frame kept besides the value is gone: a turn costs its values, its ids and order.
    const legacy = foldAll(asLegacy(await r.readLog("c")));
    const bytes = (s: ExecutionState) => JSON.stringify(s).length;
    expect(bytes(state)).toBeLessThan(bytes(legacy) / 2.5);
  });

  it("L1: an earlier log folds every call to a frame, as it always did", async () => {
    const { r } = await talk(3);
    const legacy = foldAll(asLegacy(await r.readLog("c")));
    expect(legacy._settled).toBeUndefined();
    expect(Object.keys(legacy.frames)).toHaveLength(7);
    expect(legacy.frames["turn#1"]).toMatchObject({ status: "completed", output: "re: m1" });
  });

  it("L1: a call settled otherwise keeps its frame", async () => {
    const echo = step$("echo", async (x: string) => x);
    const f = flow$("others", async (ctx) => {
      await ctx.execute(echo, "with input");
      await ctx.run("void", () => undefined);
      await ctx.run("boom", () => Promise.reject(new Error("no"))).catch(() => 0);
      await ctx.sleep(1);
      await ctx.suspend({ timeout: 5 }).catch(() => 0);
      return "done";
    });
    const r = rt(memoryStore()).registerFlow(f);
    expect((await (await r.start(f, null, { id: "o" })).result()).output).toBe("done");
    const state = await r.getState("o");
    expect(state._settled).toEqual({});
    expect(Object.keys(state.frames)).toEqual([
      "echo#0",
      "void#0",
      "boom#0",
      "sleep#0",
      "suspend#0",
    ]);
    // A step that took a second attempt keeps its frame (its attempt count is shown).
    const start = (await r.readLog("o"))[0] as Envelope;
    const e = (seq: number, kind: Envelope["kind"], payload: Json): Envelope => ({
      executionId: "o",
      seq,
      kind,
      at: start.at + seq,
      payload,
    });
    const retried = foldAll([
      start,
      e(1, "STEP_STARTED", { callId: "flaky#0" }),
      e(2, "STEP_FAILED", { callId: "flaky#0", error: { message: "once" }, retrying: true }),
      e(3, "STEP_STARTED", { callId: "flaky#0" }),
      e(4, "STEP_COMPLETED", { callId: "flaky#0", output: 1 }),
    ]);
    expect(retried.frames["flaky#0"]).toMatchObject({ status: "completed", attempts: 2 });
    expect(retried._settled).toEqual({});
  });

  it("L2: an uncached replay over kept values answers every call as the frames did", async () => {
    // Every park evicts the body: each resume reloads the state and replays from the top.
    const { r, store, ran } = await talk(12, { cache: { maxExecutions: 0 } });
    expect(ran.n).toBe(12); // no recorded step ran again
    await r.resume("c", "bye");
    const outcome = await r.waitForCompletion("c");
    expect(outcome.output).toEqual(Array.from({ length: 12 }, (_, t) => `re: m${t}`));
    const log = await store.read("c", 0);
    const lean = foldAll(log);
    const legacy = foldAll(asLegacy(log));
    for (const [callId, frame] of callsOf(legacy)) {
      expect(replayView(callFrame(lean, callId)), callId).toEqual(replayView(frame));
    }
    expect(callsOf(lean).map(([id]) => id)).toEqual(callsOf(legacy).map(([id]) => id));
  });

  it("L2: an uncached replay hands back kept null, false, 0 and empty values as they were", async () => {
    const values: Json[] = [null, false, 0, "", [], {}];
    const seen: Json[][] = [];
    const f = flow$("falsy", async (ctx) => {
      const got: Json[] = [];
      for (let i = 0; i < values.length; i++) {
        got.push(await ctx.suspend<Json>());
        got.push(await ctx.run("v", () => values[i] as Json));
      }
      seen.push(got);
      await ctx.suspend();
      return got;
    });
    const store = memoryStore();
    const r = rt(store, { cache: { maxExecutions: 0 } }).registerFlow(f);
    await r.start(f, null, { id: "z" });
    for (const v of values) {
      await r.resume("z", v);
      await until(async () => (await r.getState("z")).status === "parked");
    }
    const state = await r.getState("z");
    expect(Object.keys(state._settled?.step ?? {})).toHaveLength(values.length);
    // The last resume replayed every kept value: each suspend's payload and step's output.
    const expected = values.flatMap((v) => [v, v]);
    expect(seen.at(-1)).toEqual(expected);
    await r.resume("z", "end");
    expect((await r.waitForCompletion("z")).output).toEqual(expected);
  });

  it("L2: a replay still refuses a flow that asks a kept call as another kind (R3)", async () => {
    const { store } = await talk(2);
    // The new code asks for a step where the log recorded a suspend kept by its value.
    const changed = flow$("chat", async (ctx) => ctx.run("suspend", () => "x"));
    const other = rt(store, { cache: { maxExecutions: 0 } }).registerFlow(changed);
    await other.resume("c", "m2");
    await expect(other.waitForCompletion("c")).rejects.toSatisfy((e: unknown) =>
      isLoomError(e, "LOOM_NON_DETERMINISM"),
    );
  });

  it("L3: an event that would open or settle a kept call again is inert", async () => {
    const { r } = await talk(2);
    const log = await r.readLog("c");
    const state = foldAll(log);
    const at = (log.at(-1)?.at ?? 0) + 1;
    let seq = state.seq;
    const again = (kind: Envelope["kind"], payload: Json): Envelope => ({
      executionId: "c",
      seq: ++seq,
      kind,
      at,
      payload,
    });
    const after = foldAll([
      ...log,
      again("STEP_STARTED", { callId: "turn#0" }),
      again("STEP_COMPLETED", { callId: "turn#0", output: "forged" }),
      again("SUSPENDED", { callId: "suspend#1", scope: "", name: "suspend" }),
      again("STEP_FAILED", { callId: "turn#1", error: { message: "late" }, retrying: true }),
    ]);
    expect(after._settled).toEqual(state._settled);
    expect(after.frames).toEqual(state.frames);
    expect([after.inFlight, after.openWaits]).toEqual([state.inFlight, state.openWaits]);
  });

  it("L4: what shows a kept call reads its start from the log", async () => {
    const { r } = await talk(3);
    const log = await r.readLog("c");
    const state = await r.getState("c");
    const legacy = foldAll(asLegacy(log));
    for (const id of ["turn#1", "suspend#2"]) {
      const lean = stepDetail(log, state, id);
      expect(lean).toBeDefined();
      expect(lean?.startedAtMs).toBe(legacy.frames[id]?.firstStartedAt);
      expect(lean).toEqual(stepDetail(asLegacy(log), legacy, id));
    }
    const bars = (s: ExecutionState, l: Envelope[]) => executionBars(l, s).bars;
    expect(bars(state, log)).toEqual(bars(legacy, asLegacy(log)));
  });

  it("L5: a restore takes the kept values with the frames, and erasure empties them", async () => {
    const { r } = await talk(2);
    const state = await r.getState("c");
    const copy = createRuntime({ store: memoryStore() }).registerFlow(chat({ n: 0 }));
    try {
      await copy.restoreFromState("c2", "chat", state);
      await until(async () => (await copy.getState("c2")).status === "parked");
      const restored = await copy.getState("c2");
      expect(restored._settled).toEqual(state._settled);
      expect(canonicalJson(foldAll(await copy.readLog("c2")))).toBe(canonicalJson(restored));
    } finally {
      await copy.close();
    }
    // X5c: an erasure leaves the record empty, not absent, so the state keeps calls lean.
    expect(redactedState(state)._settled).toEqual({});
    expect(redactedState(foldAll(asLegacy(await r.readLog("c"))))._settled).toBeUndefined();
  });
});
