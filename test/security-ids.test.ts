/**
 * Issue 22 item 7: the id shapes the kernel makes are reserved (kernel/ids.ts I1..I3). A caller
 * who creates one first used to make the kernel's own start fail or adopt the caller's: a child
 * `parent::key#0` failed its real parent with LOOM_CHILD_CONFLICT, a schedule occurrence
 * `name@ISO` ran the caller's input (or, under another principal, stopped the schedule), and a
 * chain id ending in `::` rotated into `edge::~1`, which anyone could create. Each test is the
 * exploit: the caller is refused (a typed error, nothing appended) and the kernel's path proceeds.
 */
import { describe, expect, it } from "vitest";
import { flow$, isLoomError, memoryStore, occurrenceId, type Runtime } from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const T0 = Date.UTC(2026, 10, 30, 8, 0, 0);
const MINUTE = 60_000;

const double = flow$("double", async (ctx, n: number) => ctx.run("double", () => n * 2));
const parent = flow$("parent", async (ctx, n: number) =>
  ctx.awaitChild(await ctx.spawn(double, n, { key: "kid" })),
);

/** What refused a call: its code, or "no error". */
async function refusal(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => "no error",
    (e: unknown) => (isLoomError(e) ? e.code : String(e)),
  );
}

async function nothingAt(r: Runtime, id: string): Promise<void> {
  expect(await r.store.head(id)).toBe(-1);
}

describe("reserved id shapes (issue 22 item 7, kernel/ids.ts I1..I3)", () => {
  it("I1: a caller cannot start, fork to or restore onto a child id (parent::key#n); the real parent's child then runs", async () => {
    const r = rt(memoryStore()).registerFlow(double).registerFlow(parent);
    await r.start(double, 1, { id: "donor" });
    await r.waitForCompletion("donor");
    for (const id of ["p::kid#0", "a::b::c#12", "p::par#0/kid#3"]) {
      expect(await refusal(r.start(double, 999, { id }))).toBe("LOOM_INVALID_INPUT");
      expect(await refusal(r.fork("donor", 0, id))).toBe("LOOM_INVALID_INPUT");
      expect(await refusal(r.restoreFromState(id, double, await r.getState("donor")))).toBe(
        "LOOM_INVALID_INPUT",
      );
      await nothingAt(r, id);
    }
    // The parent that makes p::kid#0 spawns it and gets its child's answer, not a conflict.
    const h = await r.start(parent, 21, { id: "p" });
    expect(await h.result()).toMatchObject({ status: "completed", output: 42 });
    expect((await r.getState("p::kid#0")).input).toBe(21);
  });

  it("I2: a caller cannot start a schedule's occurrence (name@ISO); the schedule then starts it with its own input", async () => {
    let t = T0;
    const r = rt(memoryStore(), { clock: { now: () => t }, background: false }).registerFlow(
      double,
    );
    await r.schedule(double, { cron: "* * * * *", input: 5, name: "nightly" });
    const next = occurrenceId("nightly", T0 + MINUTE);
    expect(await refusal(r.start(double, 1_000_000, { id: next }))).toBe("LOOM_INVALID_INPUT");
    expect(await refusal(r.start(double, 1, { id: next, principal: "mallory" }))).toBe(
      "LOOM_INVALID_INPUT",
    );
    await nothingAt(r, next);
    t = T0 + MINUTE + 1;
    expect(await r.fireSchedules()).toEqual([next]);
    expect(await r.waitForCompletion(next)).toMatchObject({ status: "completed", output: 10 });
    // Another schedule's shape, too: any id ending in @<ISO instant> is an occurrence's.
    expect(await refusal(r.start(double, 1, { id: "other@2027-01-01T00:00:00.000Z" }))).toBe(
      "LOOM_INVALID_INPUT",
    );
  });

  it("I3, C2: a chain id ending in :: rotates to <id>~1, which no caller may create first", async () => {
    const edge = flow$("edge", async (ctx, gen: number | null) => {
      if (gen === null) return ctx.continueAsNew(1);
      return ctx.run("gen", () => `generation ${gen}`);
    });
    const r = rt(memoryStore(), { features: { continueAsNew: true } }).registerFlow(edge);
    await r.start(edge, 7, { id: "donor" });
    await r.waitForCompletion("donor");
    for (const id of ["edge::~1", "a::~12"]) {
      expect(await refusal(r.start(edge, 1, { id }))).toBe("LOOM_RESERVED_SUCCESSOR_ID");
      expect(await refusal(r.fork("donor", 0, id))).toBe("LOOM_RESERVED_SUCCESSOR_ID");
      await nothingAt(r, id);
    }
    await r.start(edge, null, { id: "edge::" });
    await until(async () => (await r.store.head("edge::~1")) >= 0);
    expect(await r.waitForCompletion("edge::~1")).toMatchObject({
      status: "completed",
      output: "generation 1",
    });
  });

  it("ids that only look near a reserved shape stay a caller's (no existing user is broken)", async () => {
    const r = rt(memoryStore()).registerFlow(double);
    for (const id of ["a::b", "a#1", "order@2026-11-30", "x~y", "a::b#c", "ticket#12@home"]) {
      expect(await r.waitForCompletion((await r.start(double, 1, { id })).id)).toMatchObject({
        status: "completed",
      });
    }
  });
});
