/**
 * Issue 21 item 6 (fork.ts V7, fold F12): a fork measures its deadline and the timeouts of the
 * steps its prefix left running from the moment it is forked, unless it keeps its origin's
 * clock; its state names what it is a fork of.
 */
import { describe, expect, it } from "vitest";
import { flow$, memoryStore, step$ } from "../src/index.ts";
import { offsetClock, runtimes, until } from "./helpers.ts";

const rt = runtimes();

describe("a fork's clock (issue 21)", () => {
  for (const keepDeadline of [false, true]) {
    it(`a fork of a step its origin left running ${keepDeadline ? "keeps the origin's clock when asked" : "gets the step's whole timeout and its deadline from the fork"}`, async () => {
      const clock = offsetClock();
      let forked = false;
      const slow = step$("slow", async (_: null, ectx) => {
        if (forked) return "done";
        // The origin's attempt hangs until its timeout or its cancel aborts it.
        return new Promise<string>((_r, reject) =>
          ectx.signal.addEventListener("abort", () => reject(new Error("aborted"))),
        );
      });
      const f = flow$("clocked", async (ctx) => ctx.execute(slow, null, { timeoutMs: 10_000 }), {
        deadlineMs: 30_000,
      });
      const r = rt(memoryStore(), { clock }).registerFlow(f);
      await r.start(f, null, { id: "origin" });
      await until(async () => (await r.readLog("origin")).some((e) => e.kind === "STEP_STARTED"));
      const at = (await r.readLog("origin")).findIndex((e) => e.kind === "STEP_STARTED");
      await r.cancel("origin", "forking from the start of its step instead");
      clock.advance(60_000); // a minute later: the origin's deadline and its step's timeout are spent
      forked = true;
      const h = await r.fork("origin", at, "fork-1", { keepDeadline });
      const out = await h.result();
      const state = await r.getState("fork-1");
      expect(state._forkedFrom).toEqual({ executionId: "origin", seq: at });
      if (keepDeadline) {
        expect(out.status).not.toBe("completed");
      } else {
        expect(out).toMatchObject({ status: "completed", output: "done" });
        expect(state.startedAt).toBeGreaterThan((await r.getState("origin")).startedAt + 59_000);
      }
    });
  }
});
