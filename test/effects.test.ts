import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  createRuntime,
  flow$,
  isLoomError,
  memoryStore,
  QuotaExceededError,
  step$,
  type Envelope,
} from "../src/index.ts";
import { compose } from "../src/effects/compose.ts";
import { runtimes, until } from "./helpers.ts";
import { slow } from "./support/slowdown.ts";

const rt = runtimes();

/** An LLM-like effect that reports the tokens it used. */
const llm = step$("llm", async (prompt: string, ectx) => {
  ectx.meter({ tokens: { input: prompt.length, output: 10 }, costUsd: 0.01 });
  return `answer to ${prompt}`;
});

describe("effects: metering and budgets (ADR 0032)", () => {
  it("meters every effect, also a failing one; unset dimensions stay undefined (Q1)", async () => {
    const boom = step$(
      "boom",
      async (_: null, ectx) => {
        ectx.meter({ tokens: { output: 3 } });
        throw new Error("tool down");
      },
      { retry: false },
    );
    const f = flow$("metered", async (ctx) => {
      await ctx.execute(llm, "hello");
      await ctx.execute(boom, null).catch(() => undefined);
      return "ok";
    });
    const r = rt(memoryStore()).registerFlow(f);
    await (await r.start(f, null, { id: "m1" })).result();
    const state = await r.getState("m1");
    expect(state._resources?.tokens).toEqual({ input: 5, output: 13 });
    expect(state._resources?.costUsd).toBeCloseTo(0.01);
    expect(typeof state._resources?.wallMs).toBe("number");
    expect(state._resources?.memBytes).toBeUndefined();
    expect(state._resources?.netBytes).toBeUndefined();
    const metered = (await r.readLog("m1")).filter((e) => e.kind === "RESOURCE_METERED");
    expect(metered.map((e) => (e.payload as { callId: string }).callId)).toEqual([
      "llm#0",
      "boom#0",
    ]);
  });

  it("refuses the effect that would start after the budget is spent, before it runs", async () => {
    let calls = 0;
    const counted = step$("llm", async (prompt: string, ectx) => {
      calls++;
      ectx.meter({ tokens: { input: 40, output: 60 } });
      return prompt;
    });
    const f = flow$(
      "budgeted",
      async (ctx) => {
        const out: string[] = [];
        for (const p of ["a", "b", "c"]) {
          try {
            out.push(await ctx.execute(counted, p));
          } catch (e) {
            out.push(e instanceof QuotaExceededError ? `refused ${p}` : "other");
          }
        }
        return out;
      },
      { budget: { tokens: 200 } },
    );
    const r = rt(memoryStore()).registerFlow(f);
    const outcome = await (await r.start(f, null, { id: "b1" })).result();
    expect(outcome.output).toEqual(["a", "b", "refused c"]);
    expect(calls).toBe(2);
    const log = await r.readLog("b1");
    const quota = log.find((e) => e.kind === "QUOTA_EXCEEDED");
    expect(quota?.payload).toMatchObject({
      callId: "llm#2",
      dimension: "tokens",
      budget: "execution",
    });
    const failed = log.find((e) => e.kind === "STEP_FAILED");
    expect(isLoomError((failed?.payload as { error: unknown }).error, "LOOM_QUOTA_EXCEEDED")).toBe(
      true,
    );
    expect((await r.getState("b1"))._quotaExceeded).toEqual({
      dimension: "tokens",
      budget: "execution",
    });
  });

  it("a start's budget overrides the flow's and is refused when malformed, before anything is appended", async () => {
    const store = memoryStore();
    const f = flow$("b", async (ctx) => ctx.execute(llm, "x"), { budget: { costUsd: 100 } });
    const r = rt(store).registerFlow(f);
    const e = await r
      .start(f, null, { id: "bad", budget: { tokens: -1 } })
      .catch((err: unknown) => err);
    expect(isLoomError(e, "LOOM_INVALID_INPUT")).toBe(true);
    expect(await store.list()).toEqual([]);
    const h = await r.start(f, null, { id: "ok", budget: { tokens: 5 } });
    expect((await h.result()).status).toBe("completed");
    expect((await r.getState("ok"))._budget).toEqual({ tokens: 5 });
  });

  it("G2: a flow that uses no effect and no budget writes the same log with or without the chain", async () => {
    const f = flow$("plain", async (ctx) => {
      const a = await ctx.run("a", () => 1);
      const [b] = await ctx.parallel([async (c) => c.run("b", () => 2)]);
      return a + (b ?? 0) + (await ctx.decide("d", () => 3)) + (await ctx.suspend<number>());
    });
    const logs: Envelope[][] = [];
    for (const middleware of [undefined, []]) {
      let t = 1_000;
      const r = createRuntime({
        store: memoryStore(),
        clock: { now: () => (t += 1) },
        ownerId: "same",
        background: false,
        ...(middleware ? { middleware } : {}),
      });
      r.registerFlow(f);
      const h = await r.start(f, null, { id: "g2" });
      await r.resume("g2", 4);
      expect((await h.result()).output).toBe(10);
      logs.push(await r.readLog("g2"));
      await r.close();
    }
    expect(canonicalJson(logs[0])).toBe(canonicalJson(logs[1]));
  });
});

describe("compose", () => {
  it("runs middleware as an onion and refuses a second next()", async () => {
    const seen: string[] = [];
    const chain = compose<string[]>(
      [
        async (_, next) => (seen.push("a>"), await next(), seen.push("<a")),
        async (_, next) => (seen.push("b>"), await next(), seen.push("<b")),
      ],
      async () => void seen.push("handler"),
    );
    await chain([]);
    expect(seen).toEqual(["a>", "b>", "handler", "<b", "<a"]);
    const twice = compose<null>([async (_, next) => (await next(), next())], async () => 1);
    await expect(twice(null)).rejects.toThrow("next() was called twice");
  });
});

describe("ctx.negotiateBudget (ADR 0032 R2)", () => {
  it("grants min(request, ceiling - spent), records it, replays the same grant, and enforces it", async () => {
    const store = memoryStore();
    const spend = step$("spend", async (n: number, ectx) => {
      ectx.meter({ costUsd: n });
      return n;
    });
    const make = (ceiling: number) =>
      flow$("negotiate", async (ctx) => {
        await ctx.execute(spend, 3);
        const first = await ctx.negotiateBudget("costUsd", 10, { ceiling });
        const second = await ctx.negotiateBudget("costUsd", 1, { ceiling });
        await ctx.suspend();
        await ctx.execute(spend, 4);
        const refused = await ctx.execute(spend, 1).then(
          () => "ran",
          (e: unknown) => (e instanceof QuotaExceededError ? "refused" : "other"),
        );
        return { first, second, refused };
      });
    const a = rt(store, { ownerId: "A" }).registerFlow(make(7));
    await a.start("negotiate", null, { id: "n1" });
    await until(async () => (await store.list())[0]?.status === "parked");
    await a.close();
    const decisions = (await store.read("n1")).filter((e) => e.kind === "DECISION_RECORDED");
    expect(decisions.map((e) => (e.payload as { value: { grant: number } }).value.grant)).toEqual([
      4, 1,
    ]);
    // A re-run under a different ceiling in code is served the recorded grants.
    const b = rt(store.reopen(), { ownerId: "B" }).registerFlow(make(100));
    await b.resume("n1", null);
    const outcome = await b.waitForCompletion("n1", { timeoutMs: slow(5000) });
    expect(outcome.output).toEqual({ first: 4, second: 1, refused: "refused" });
    const state = await b.getState("n1");
    // Each grant is what may be spent from then on: the second (1 at 3 spent) sets the limit to 4.
    expect(state._budget).toEqual({ costUsd: 4 });
    expect(state._quotaExceeded).toEqual({ dimension: "costUsd", budget: "execution" });
  });

  it("refuses a bad dimension or amount before anything is recorded", async () => {
    const f = flow$("bad-negotiate", async (ctx) => {
      const errors: string[] = [];
      for (const call of [
        () => ctx.negotiateBudget("gold", 1, { ceiling: 2 }),
        () => ctx.negotiateBudget("tokens", -1, { ceiling: 2 }),
        () => ctx.negotiateBudget("tokens", 1, { ceiling: Number.NaN }),
      ]) {
        errors.push(
          await call().then(
            () => "granted",
            (e: unknown) => (isLoomError(e) ? e.code : "?"),
          ),
        );
      }
      return errors;
    });
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "bn" })).result();
    expect(out.output).toEqual(["LOOM_INVALID_INPUT", "LOOM_INVALID_INPUT", "LOOM_INVALID_INPUT"]);
    expect((await r.readLog("bn")).some((e) => e.kind === "DECISION_RECORDED")).toBe(false);
  });
});

describe("ctx.nestedBudget", () => {
  it("counts a scope's spend toward the execution's, and the scope runs out while the flow goes on", async () => {
    const tokens = step$("llm", async (p: string, ectx) => {
      ectx.meter({ tokens: { output: 100 } });
      return p;
    });
    const f = flow$(
      "nested",
      async (ctx) => {
        const inner = await ctx.nestedBudget("research", { tokens: 150 }, async (c) => {
          const out: string[] = [];
          for (const p of ["r1", "r2", "r3"]) {
            out.push(
              await c.execute(tokens, p).catch((e: unknown) => (isLoomError(e) ? e.code : "?")),
            );
          }
          return out;
        });
        const after = await ctx.execute(tokens, "outside");
        return { inner, after };
      },
      { budget: { tokens: 1000 } },
    );
    const r = rt(memoryStore()).registerFlow(f);
    const outcome = await (await r.start(f, null, { id: "nb" })).result();
    expect(outcome.output).toEqual({
      inner: ["r1", "r2", "LOOM_QUOTA_EXCEEDED"],
      after: "outside",
    });
    const state = await r.getState("nb");
    expect(state._resources?.tokens).toEqual({ output: 300 });
    expect(state._scopeResources?.research?.tokens).toEqual({ output: 200 });
    const quota = (await r.readLog("nb")).find((e) => e.kind === "QUOTA_EXCEEDED");
    expect(quota?.payload).toMatchObject({ budget: "research", dimension: "tokens" });
  });
});
