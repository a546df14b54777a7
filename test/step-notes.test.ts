/**
 * Issue 21 item 8, the kernel half: an effect records a fact mid-call (EffectContext.note, a
 * STEP_NOTED, effect-call N1), durable before the promise resolves, and the attempt that runs the
 * step next reads it in `notes` (fold/steps.ts S4): after a stop in the middle of the call and a
 * recovery by another runtime, after a failed attempt, never for a fresh step, and no longer once
 * the step settled. Bad notes are refused before anything is appended.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  InvalidInputError,
  memoryStore,
  PayloadTooLargeError,
  step$,
  type Json,
  type Runtime,
  type StepNote,
} from "../src/index.ts";
import { expectReplayEquality, until } from "./helpers.ts";

const open: Runtime[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});

describe("a step's notes (issue 21 item 8)", () => {
  it("a note made before a stop is durable, and the recovering attempt reads it; the settled step drops it", async () => {
    const store = memoryStore();
    const seen: StepNote[][] = [];
    let stops = 1;
    const remote = step$("remote", async (_: null, ectx) => {
      seen.push([...(ectx.notes ?? [])]);
      await ectx.note?.({ task: `t${ectx.attempt}` });
      if (stops-- > 0) {
        await new Promise((_r, reject) => ectx.signal.addEventListener("abort", reject));
      }
      return "done";
    });
    const f = flow$("noter", async (ctx) => ctx.execute(remote, null, { retry: false }));
    const make = () => {
      const r = createRuntime({ store, closeStore: false, background: false, leaseTtlMs: 1 });
      r.registerFlow(f);
      open.push(r);
      return r;
    };
    const first = make();
    await first.start(f, null, { id: "n1" });
    await until(() => stops === 0);
    // Durable before note() resolved: a reader in another runtime sees it now.
    const reader = make();
    const log = await reader.readLog("n1");
    expect(log.map((e) => e.kind)).toEqual(["EXECUTION_STARTED", "STEP_STARTED", "STEP_NOTED"]);
    expect(log[2]?.payload).toEqual({ callId: "remote#0", attempt: 1, note: { task: "t1" } });
    expect((await reader.getState("n1")).frames["remote#0"]?.notes).toEqual([
      { attempt: 1, note: { task: "t1" } },
    ]);
    await first.close();

    const second = make();
    await second.recoverAbandoned();
    expect((await second.waitForCompletion("n1")).output).toBe("done");
    expect(seen).toEqual([[], [{ attempt: 1, note: { task: "t1" } }]]);
    const state = await second.getState("n1");
    expect(state.frames["remote#0"]?.status).toBe("completed");
    expect(state.frames["remote#0"]?.notes).toBeUndefined();
    await expectReplayEquality(second, "n1");
  });

  it("a fork from the middle of a noted call does not read the origin's notes (fork-point F13)", async () => {
    const store = memoryStore();
    const seen: StepNote[][] = [];
    let hold = true;
    const remote = step$("remote", async (_: null, ectx) => {
      seen.push([...(ectx.notes ?? [])]);
      await ectx.note?.({ task: `${ectx.executionId}:${ectx.attempt}` });
      while (hold) await new Promise((r) => setTimeout(r, 5));
      return "done";
    });
    const f = flow$("fork-noter", async (ctx) => ctx.execute(remote, null, { retry: false }));
    const r = createRuntime({ store, background: false });
    open.push(r);
    r.registerFlow(f);
    await r.start(f, null, { id: "origin" });
    await until(() => seen.length === 1);
    await until(async () => (await r.readLog("origin")).some((e) => e.kind === "STEP_NOTED"));
    const noted = (await r.readLog("origin")).find((e) => e.kind === "STEP_NOTED");
    // The origin's call is still running; the fork's prefix ends at its note.
    await r.fork("origin", noted?.seq ?? -1, "forked");
    await until(() => seen.length === 2);
    hold = false;
    expect((await r.waitForCompletion("forked")).output).toBe("done");
    expect((await r.waitForCompletion("origin")).output).toBe("done");
    expect(seen[1]).toEqual([]);
  });

  it("a retried attempt reads what the failed one noted, and notes of its own", async () => {
    const seen: number[][] = [];
    const flaky = step$("flaky", async (_: null, ectx) => {
      seen.push((ectx.notes ?? []).map((n) => n.attempt));
      await ectx.note?.({ attempt: ectx.attempt });
      if (ectx.attempt < 3) throw new Error("again");
      return ectx.attempt;
    });
    const f = flow$("retrier", async (ctx) =>
      ctx.execute(flaky, null, { retry: { maxAttempts: 3, initialDelayMs: 1 } }),
    );
    const r = createRuntime({ store: memoryStore(), background: false });
    open.push(r);
    r.registerFlow(f);
    await r.start(f, null, { id: "n2" });
    expect((await r.waitForCompletion("n2")).output).toBe(3);
    expect(seen).toEqual([[], [1], [1, 2]]);
    const noted = (await r.readLog("n2")).filter((e) => e.kind === "STEP_NOTED");
    expect(noted.map((e) => (e.payload as { attempt: number }).attempt)).toEqual([1, 2, 3]);
    await expectReplayEquality(r, "n2");
  });

  const bad: [string, (note: (fact: { [k: string]: Json }) => Promise<void>) => Promise<void>][] = [
    ["not an object", (note) => note(["a"] as unknown as { [k: string]: Json })],
    ["not JSON", (note) => note({ at: new Map() } as unknown as { [k: string]: Json })],
    ["too large", (note) => note({ text: "x".repeat(17 * 1024) })],
    [
      "the 17th of an attempt",
      async (note) => {
        for (let i = 0; i < 16; i++) await note({ i });
        await note({ i: 16 });
      },
    ],
  ];
  for (const [what, make] of bad) {
    it(`a note that is ${what} is refused with a typed error, and no bad note is appended`, async () => {
      let thrown: unknown;
      const noter = step$("noter", async (_: null, ectx) => {
        try {
          await make((fact) => ectx.note?.(fact) ?? Promise.resolve());
        } catch (e) {
          thrown = e;
        }
        return "ok";
      });
      const f = flow$("bad-noter", async (ctx) => ctx.execute(noter, null));
      const r = createRuntime({ store: memoryStore(), background: false });
      open.push(r);
      r.registerFlow(f);
      await r.start(f, null, { id: "n3" });
      expect((await r.waitForCompletion("n3")).output).toBe("ok");
      expect(thrown).toBeInstanceOf(
        what === "too large" ? PayloadTooLargeError : InvalidInputError,
      );
      const noted = (await r.readLog("n3")).filter((e) => e.kind === "STEP_NOTED");
      expect(noted.length).toBe(what.startsWith("the 17th") ? 16 : 0);
    });
  }

  it("a note after the step settled is InvalidInputError, and nothing is appended", async () => {
    let late: ((fact: { [k: string]: Json }) => Promise<void>) | undefined;
    const quick = step$("quick", (_: null, ectx) => {
      late = (fact) => ectx.note?.(fact) ?? Promise.resolve();
      return 1;
    });
    const f = flow$("late-noter", async (ctx) => {
      await ctx.execute(quick, null);
      const error = await (late?.({ late: true }) ?? Promise.resolve()).then(
        () => "noted",
        (e: unknown) => (e instanceof InvalidInputError ? e.code : String(e)),
      );
      return error;
    });
    const r = createRuntime({ store: memoryStore(), background: false });
    open.push(r);
    r.registerFlow(f);
    await r.start(f, null, { id: "n4" });
    expect((await r.waitForCompletion("n4")).output).toBe("LOOM_INVALID_INPUT");
    expect((await r.readLog("n4")).some((e) => e.kind === "STEP_NOTED")).toBe(false);
  });
});
