/**
 * The two refusals of `ctx.continueAsNew` that depend on what the generation has open (ADR 0109
 * D1): an open `ctx.parallel` scope and an outstanding wait each have a code of their own, are
 * still InvalidInputErrors (existing catches keep working), are raised before anything is
 * appended, and read back from the log as their own class (STYLE 5).
 */
import { describe, expect, it } from "vitest";
import {
  ContinueAsNewScopeOpenError,
  ContinueAsNewWaitOutstandingError,
  errorFromData,
  flow$,
  InvalidInputError,
  isLoomError,
  memoryStore,
} from "../src/index.ts";
import { runtimes } from "./helpers.ts";

const rt = runtimes();
const chains = () => rt(memoryStore(), { features: { continueAsNew: true } });

/** What a refusal was: its code, and whether it is each class. */
const seen = (e: unknown) => ({
  code: isLoomError(e) ? e.code : "other",
  invalidInput: e instanceof InvalidInputError,
  scopeOpen: e instanceof ContinueAsNewScopeOpenError,
  waitOutstanding: e instanceof ContinueAsNewWaitOutstandingError,
});

describe("continueAsNew refusals have codes of their own (ADR 0109 D1)", () => {
  it("D1: a call from a ctx.parallel branch, or beside an open parallel call, is LOOM_CONTINUE_AS_NEW_SCOPE_OPEN", async () => {
    const f = flow$("scope-open", async (ctx) => {
      const refusals: unknown[] = [];
      await ctx
        .parallel([async (b) => b.continueAsNew(null), async () => "other branch"])
        .catch((e: unknown) => refusals.push(seen(e)));
      await Promise.all([
        ctx.parallel([async (b) => b.run("x", () => 1)]),
        ctx.continueAsNew(null),
      ]).catch((e: unknown) => refusals.push(seen(e)));
      return refusals;
    });
    const r = chains().registerFlow(f);
    const out = await (await r.start(f, null, { id: "so" })).result();
    const refusal = {
      code: "LOOM_CONTINUE_AS_NEW_SCOPE_OPEN",
      invalidInput: true,
      scopeOpen: true,
      waitOutstanding: false,
    };
    expect(out).toEqual({ status: "completed", output: [refusal, refusal] });
    expect((await r.readLog("so")).map((e) => e.kind)).not.toContain("EXECUTION_CONTINUED");
    expect(await r.readLog("so~1")).toEqual([]);
  });

  it("D1: a call with a wait registered and not yet answered is LOOM_CONTINUE_AS_NEW_WAIT_OUTSTANDING", async () => {
    const f = flow$("wait-outstanding", async (ctx) => {
      const waiting = ctx.receive<string>();
      const refusal = await ctx.continueAsNew(null).catch((e: unknown) => seen(e));
      return { refusal, message: await waiting };
    });
    // A wait a returned branch left open: the parallel is over, the wait is not.
    const g = flow$("wait-left-open", async (ctx) => {
      let left: Promise<string> = Promise.resolve("none");
      await ctx.parallel([
        async (b) => {
          left = b.receive<string>();
          left.catch(() => undefined);
          return null;
        },
      ]);
      const refusal = await ctx.continueAsNew(null).catch((e: unknown) => seen(e));
      return { refusal, message: await left };
    });
    const r = chains().registerFlow(f).registerFlow(g);
    const refusal = {
      code: "LOOM_CONTINUE_AS_NEW_WAIT_OUTSTANDING",
      invalidInput: true,
      scopeOpen: false,
      waitOutstanding: true,
    };
    for (const [flow, id] of [
      [f, "wo"],
      [g, "wl"],
    ] as const) {
      const h = await r.start(flow, null, { id });
      await r.send(id, "late");
      expect(await h.result()).toEqual({
        status: "completed",
        output: { refusal, message: "late" },
      });
      expect(await r.readLog(`${id}~1`)).toEqual([]);
    }
  });

  it("STYLE 5: an uncaught refusal is the execution's failure, and reads back from the log as its class", async () => {
    const f = flow$("uncaught", async (ctx) => {
      void ctx.receive<string>().catch(() => undefined);
      return ctx.continueAsNew(null);
    });
    const r = chains().registerFlow(f);
    const out = await (await r.start(f, null, { id: "un" })).result();
    expect(out.status).toBe("failed");
    expect(out.error?.code).toBe("LOOM_CONTINUE_AS_NEW_WAIT_OUTSTANDING");
    const back = errorFromData(out.error);
    expect(back).toBeInstanceOf(ContinueAsNewWaitOutstandingError);
    expect(back).toBeInstanceOf(InvalidInputError);
    expect(back.code).toBe("LOOM_CONTINUE_AS_NEW_WAIT_OUTSTANDING");
    const scope = errorFromData(
      new ContinueAsNewScopeOpenError("a parallel scope is open").toJSON(),
    );
    expect(scope).toBeInstanceOf(ContinueAsNewScopeOpenError);
    expect(scope.name).toBe("ContinueAsNewScopeOpenError");
  });
});
