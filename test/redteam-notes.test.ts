/**
 * Red team (issue 21 item 8, effect-call.ts N1 "only a running attempt notes"): an attempt that
 * failed and left work running may not note into the next attempt's record.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, step$, type Runtime } from "../src/index.ts";

const open: Runtime[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});

describe("red team: a stale attempt's notes", () => {
  it("a failed attempt's late note is refused, not recorded as the next attempt's", async () => {
    const seen: string[][] = [];
    let lateNote: "refused" | "accepted" | "pending" = "pending";
    const flaky = step$("flaky", async (_: null, ectx) => {
      seen.push((ectx.notes ?? []).map((n) => String((n.note as { task: string }).task)));
      if (ectx.attempt === 1) {
        // Attempt 1 started a remote task, failed, and its callback notes later.
        setTimeout(() => {
          ectx.note?.({ task: "stale-from-attempt-1" }).then(
            () => (lateNote = "accepted"),
            () => (lateNote = "refused"),
          );
        }, 40);
        throw new Error("first attempt fails");
      }
      await new Promise((r) => setTimeout(r, 150));
      return ectx.attempt;
    });
    const f = flow$("stale", async (ctx) =>
      ctx.execute(flaky, null, { retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 1 } }),
    );
    const r = createRuntime({ store: memoryStore(), background: false });
    open.push(r);
    r.registerFlow(f);
    await r.start(f, null, { id: "s1" });
    expect((await r.waitForCompletion("s1")).output).toBe(2);
    const noted = (await r.readLog("s1")).filter((e) => e.kind === "STEP_NOTED");
    // Attempt 2 noted nothing; what attempt 1 noted after it ended is not attempt 2's.
    expect(
      noted.map((e) => e.payload as { attempt: number; note: { task: string } }),
    ).not.toContainEqual({ callId: "flaky#0", attempt: 2, note: { task: "stale-from-attempt-1" } });
    expect(lateNote).toBe("refused");
  });
});
