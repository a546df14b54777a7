/**
 * restoreFromState and resumeAs (fold/restored.ts R1, R2; runtime/restore.ts R3..R6), and the
 * ADR 0109 fixes they carry: fix round 1 (1) (a restore cannot forge a successor) and fix round
 * 3 (1), (2) (the id reservation holds for a restore; nothing a rotation inherits comes from the
 * caller's state).
 */
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  flow$,
  foldAll,
  fold,
  initialState,
  memoryStore,
  step$,
  type Envelope,
  type ExecutionState,
  type Store,
} from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();

/** `read` and `head` calls, by the id they name. */
function watched(store: Store): { store: Store; ids: string[] } {
  const ids: string[] = [];
  const wrapped: Store = {
    ...store,
    read: (id, from, limit) => (ids.push(id), store.read(id, from, limit)),
    head: (id) => (ids.push(id), store.head(id)),
  };
  return { store: wrapped, ids };
}

/** A step, then a suspend: `{ a, msg }`, with the step's runs counted. */
function twoStep(counter: { a: number }, version = "1") {
  return flow$(
    "two-step",
    async (ctx, input: { n: number }) => {
      const a = await ctx.run("a", () => {
        counter.a++;
        return `a of ${input.n}`;
      });
      const msg = await ctx.suspend<string>();
      return { a, msg, version };
    },
    { version },
  );
}

const parked = (s: ExecutionState) => s.status === "parked";

/**
 * Changes the recorded output of step `a`, wherever the state keeps it: a frame, or since schema
 * 1.13.0 its value alone (fold/settled.ts L1), which is where a plainly completed step is.
 */
function patchA(s: ExecutionState, patch: (output: unknown) => string): void {
  const lean = s._settled?.step;
  if (lean && Object.hasOwn(lean, "a#0")) {
    lean["a#0"] = patch(lean["a#0"]);
    return;
  }
  const a = Object.values(s.frames).find((f) => f.name === "a");
  if (!a) throw new Error("no call a");
  a.output = patch(a.output);
}

const spend = step$("spend", async (_: null, ectx) => {
  ectx.meter({ tokens: { input: 5, output: 5 }, costUsd: 0.01 });
  return "spent";
});

describe("restoreFromState (fold/restored.ts R1, R2; restore.ts R3..R5)", () => {
  it("R1: a restore onto a new id replays the restored frames, so their steps do not run again", async () => {
    const store = memoryStore();
    const counter = { a: 0 };
    const r = rt(store).registerFlow(twoStep(counter));
    await r.start("two-step", { n: 1 }, { id: "orig" });
    await until(async () => parked(await r.getState("orig")));
    const copy = await r.getState("orig");
    const handle = await r.restoreFromState("copy", "two-step", copy);
    await until(async () => parked(await r.getState("copy")));
    expect(counter.a).toBe(1);
    await r.resume("copy", "hello");
    expect((await handle.result()).output).toEqual({ a: "a of 1", msg: "hello", version: "1" });
    const log = await r.readLog("copy");
    expect(log.map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "STATE_RESTORED",
      "RESUMED",
      "EXECUTION_COMPLETED",
    ]);
    expect(log[1]?.meta?.kernel).toBe(true);
  });

  it("R5: a restore of an execution held parked drops the held body and drives the restored record", async () => {
    const store = memoryStore();
    const counter = { a: 0 };
    const r = rt(store).registerFlow(twoStep(counter));
    const handle = await r.start("two-step", { n: 2 }, { id: "fixme" });
    await until(async () => parked(await r.getState("fixme")));
    const state = await r.getState("fixme");
    expect(state._settled?.step?.["a#0"]).toBe("a of 2"); // L1: kept by its value
    patchA(state, () => "patched by hand");
    await r.restoreFromState("fixme", "two-step", state);
    await r.resume("fixme", "go on");
    const outcome = await handle.result();
    expect(outcome.output).toEqual({ a: "patched by hand", msg: "go on", version: "1" });
    expect(counter.a).toBe(1);
    // A fresh runtime replaying the log alone reaches the same state (the restore is a fact).
    const log = await r.readLog("fixme");
    expect(canonicalJson(foldAll(log))).toBe(canonicalJson(await r.getState("fixme")));
  });

  it("R2, fix rounds 1 (1) and 3 (2): owner, chain, spend, inbox cursors and start stay the log's; a rotation inherits the durable ones", async () => {
    const store = memoryStore();
    let t = 1_000_000;
    const clock = { now: () => (t += 5) };
    const chat = flow$(
      "chat",
      async (ctx, input: { gen: number } | null) => {
        await ctx.execute(spend, null);
        const msg = await ctx.receive<string>();
        if ((input?.gen ?? 0) === 0) return ctx.continueAsNew({ gen: 1, msg });
        return { msg, gen: input?.gen };
      },
      { deadlineMs: 3_600_000 },
    );
    const r = rt(store, { clock, features: { continueAsNew: true } }).registerFlow(chat);
    await r.start(chat, null, { id: "owned", principal: "alice" });
    const as = { as: "alice" };
    await until(async () => parked(await r.getState("owned", as)));
    const honest = await r.getState("owned", as);
    const forged: ExecutionState = {
      ...structuredClone(honest),
      _principal: "mallory",
      _chain: { chainId: "elsewhere", generation: 7 },
      _continuedTo: "elsewhere~8",
      _resources: { tokens: { input: 0, output: 0 }, costUsd: 0 },
      _quotaExceeded: { dimension: "tokens", budget: "forged" },
      _inbox: { cursors: { main: 999 }, dedupe: ["forged"] },
      startedAt: 1,
      deadlineMs: 1,
    };
    await r.restoreFromState("owned", "chat", forged, as);
    const after = await r.getState("owned", as);
    for (const key of [
      "_principal",
      "_chain",
      "_continuedTo",
      "_resources",
      "_quotaExceeded",
      "_inbox",
      "startedAt",
      "deadlineMs",
    ] as const) {
      expect(after[key], key).toEqual(honest[key]);
    }
    await r.send("owned", "hi", as);
    // Committed: the successor's start comes first, the predecessor's EXECUTION_CONTINUED after.
    await until(async () => (await r.getState("owned", as)).status === "continued");
    // What generation 1 started with: its sequence 0 alone, folded.
    const successor = foldAll((await r.readLog("owned~1", as)).slice(0, 1));
    const predecessor = await r.getState("owned", as);
    expect(predecessor.status).toBe("continued");
    expect(successor._principal).toBe("alice");
    expect(successor._chain).toMatchObject({ chainId: "owned", generation: 1 });
    expect(successor.deadlineMs).toBe(honest.startedAt + 3_600_000 - successor.startedAt);
    expect(successor._inbox).toEqual(predecessor._inbox);
    expect(successor._inbox?.cursors.main).toBe(0);
    expect(successor._resources).toEqual(predecessor._resources);
    expect(successor._resources?.costUsd).toBeCloseTo(0.01);
  });

  it("fix round 3 (1): a restore onto a successor-shaped id with no log is ReservedSuccessorIdError, after authorization, reading nothing but that id", async () => {
    const base = memoryStore();
    const counter = { a: 0 };
    const seed = rt(base).registerFlow(twoStep(counter));
    await seed.start("two-step", { n: 3 }, { id: "victim" });
    await until(async () => parked(await seed.getState("victim")));
    const state = await seed.getState("victim");
    for (const id of ["victim~1", "victim~5", "victim::g#0~1", "victim~1::x"]) {
      const { store, ids } = watched(base);
      const r = rt(store, { background: false }).registerFlow(twoStep(counter));
      for (const caller of [{}, { as: "anyone" }]) {
        ids.length = 0;
        await expect(r.restoreFromState(id, "two-step", state, caller)).rejects.toMatchObject({
          code: "LOOM_RESERVED_SUCCESSOR_ID",
        });
        expect(ids.length).toBeGreaterThan(0);
        expect(ids.every((x) => x === id)).toBe(true);
      }
      expect(await base.head(id)).toBe(-1);
    }
  });

  it("R3, R4: refusals come before anything is appended", async () => {
    const store = memoryStore();
    const counter = { a: 0 };
    const r = rt(store).registerFlow(twoStep(counter));
    await r.start("two-step", { n: 4 }, { id: "mine", principal: "alice" });
    await until(async () => parked(await r.getState("mine", { as: "alice" })));
    const state = await r.getState("mine", { as: "alice" });
    const before = await store.head("mine");
    const cases: [unknown, string, object, string][] = [
      [state, "two-step", {}, "LOOM_UNAUTHORIZED"],
      [state, "two-step", { as: "bob" }, "LOOM_UNAUTHORIZED"],
      [state, "no-such-flow", { as: "alice" }, "LOOM_UNKNOWN_FLOW"],
      ["not a state", "two-step", { as: "alice" }, "LOOM_INVALID_INPUT"],
      [
        { frames: { x: { kind: "step", status: "bogus" } } },
        "two-step",
        { as: "alice" },
        "LOOM_INVALID_INPUT",
      ],
      [
        {
          frames: {
            x: {
              kind: "step",
              status: "completed",
              name: "a",
              scope: "",
              firstStartedAt: 1,
              attempts: 0,
            },
          },
        },
        "two-step",
        { as: "alice" },
        "LOOM_INVALID_INPUT",
      ],
      [{ ...state, input: () => 1 }, "two-step", { as: "alice" }, "LOOM_INVALID_INPUT"],
    ];
    for (const [s, flow, caller, code] of cases) {
      await expect(r.restoreFromState("mine", flow, s, caller), code).rejects.toMatchObject({
        code,
      });
    }
    expect(await store.head("mine")).toBe(before);
    // An ended execution is not restored either.
    await r.resume("mine", "done", { as: "alice" });
    await r.waitForCompletion("mine", { as: "alice" });
    const ended = await store.head("mine");
    await expect(
      r.restoreFromState("mine", "two-step", state, { as: "alice" }),
    ).rejects.toMatchObject({ code: "LOOM_NOT_RESUMABLE" });
    expect(await store.head("mine")).toBe(ended);
  });

  it("R1: the fold derives counts from the frames and ignores a STATE_RESTORED that is not the kernel's", () => {
    const start: Envelope = {
      executionId: "x",
      seq: 0,
      kind: "EXECUTION_STARTED",
      at: 1,
      payload: { flow: "f", flowVersion: "1", fingerprint: "p", schemaVersion: "1.6.0" },
    };
    const restored = (kernel: boolean): Envelope => ({
      executionId: "x",
      seq: 1,
      kind: "STATE_RESTORED",
      at: 2,
      payload: {
        state: {
          frames: {
            "s#0": {
              kind: "suspend",
              name: "s",
              scope: "",
              status: "waiting",
              firstStartedAt: 1,
              attempts: 1,
            },
            "a#0": {
              kind: "step",
              name: "a",
              scope: "",
              status: "started",
              firstStartedAt: 1,
              attempts: 1,
            },
          },
          inFlight: 40,
          openWaits: 40,
          _openSuspends: ["nonsense"],
        },
      },
      ...(kernel ? { meta: { kernel: true } } : {}),
    });
    const app = fold(fold(initialState("x"), start), restored(false));
    expect(app.frames).toEqual({});
    const kernel = fold(fold(initialState("x"), start), restored(true));
    expect([kernel.inFlight, kernel.openWaits, kernel._openSuspends]).toEqual([1, 1, ["s#0"]]);
    expect(kernel.status).toBe("running");
  });
});

describe("resumeAs (restore.ts R6)", () => {
  it("R6: a parked execution moves to a new flow version, its state transformed, restore and resume in one batch", async () => {
    const store = memoryStore();
    const counter = { a: 0 };
    const v1 = rt(store).registerFlow(twoStep(counter, "1"));
    await v1.start("two-step", { n: 5 }, { id: "upgrade" });
    await until(async () => parked(await v1.getState("upgrade")));
    await v1.close();
    const v2 = rt(store).registerFlow(twoStep(counter, "2"));
    // Version 2 does not list version 1 as compatible: a plain resume cannot drive it.
    await v2.resume("upgrade", "plain");
    await expect(v2.waitForCompletion("upgrade")).rejects.toMatchObject({
      code: "LOOM_FLOW_VERSION",
    });
    const head = await store.head("upgrade");
    await v2.resumeAs("upgrade", "two-step", "upgraded", {
      transformState: (s) => {
        patchA(s, (output) => `${String(output)} (v2)`);
        // The suspend was answered by the plain resume; "upgraded" is queued for the next one.
        return s;
      },
    });
    const log = await v2.readLog("upgrade");
    expect(
      log
        .slice(head + 1)
        .map((e) => e.kind)
        .slice(0, 2),
    ).toEqual(["STATE_RESTORED", "RESUMED"]);
    const outcome = await v2.waitForCompletion("upgrade");
    expect(outcome.output).toEqual({ a: "a of 5 (v2)", msg: "plain", version: "2" });
    expect(counter.a).toBe(1);
    const state = await v2.getState("upgrade");
    expect([state.flowVersion, state.fingerprint]).toEqual(["2", expect.any(String)]);
  });

  it("R4: a transformState that throws, or returns no state, appends nothing", async () => {
    const store = memoryStore();
    const counter = { a: 0 };
    const r = rt(store).registerFlow(twoStep(counter));
    await r.start("two-step", { n: 6 }, { id: "t" });
    await until(async () => parked(await r.getState("t")));
    const head = await store.head("t");
    await expect(
      r.resumeAs("t", "two-step", "x", {
        transformState: () => {
          throw new Error("no");
        },
      }),
    ).rejects.toThrow("no");
    await expect(
      r.resumeAs("t", "two-step", "x", { transformState: () => 42 }),
    ).rejects.toMatchObject({ code: "LOOM_INVALID_INPUT" });
    expect(await store.head("t")).toBe(head);
    // The held body was dropped by the first attempt; the execution still resumes.
    await r.resume("t", "still fine");
    expect((await r.waitForCompletion("t")).output).toMatchObject({ msg: "still fine" });
  });
});
