/**
 * Issue 20: spend is bounded on the paths this session closed. The invariant each test hunts for:
 * what the effects really spent (the fake provider's own count) is at most the budget plus one
 * reservation, what the log records is at most what was really spent, and a refusal leaves a
 * QUOTA_EXCEEDED fact. (Crashed attempts are test/spend-crash.test.ts's, forks
 * test/spend-fork.test.ts's, prices test/spend-pricing.test.ts's.)
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  flow$,
  isLoomError,
  streamTokenBudget,
  type Budget,
  type Runtime,
  type RuntimeOptions,
} from "../src/index.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { fakeAnthropic, type FakeAnthropic } from "../src/testing/index.ts";
import { COST, paidTool, refusedOr, spendRuntimes } from "./support/spend.ts";

const runtime = spendRuntimes();
const servers: FakeAnthropic[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function recorded(r: Runtime, id: string) {
  const state = await r.getState(id);
  const tokens = state._resources?.tokens;
  const events = await r.store.read(id, 0, 10_000);
  return {
    tokens: (tokens?.input ?? 0) + (tokens?.output ?? 0),
    quotaFacts: events.filter((e) => e.kind === "QUOTA_EXCEEDED").length,
  };
}

describe("spend paths (issue 20)", () => {
  it("ctx.parallel with 10 branches: what calls in flight hold is reserved, so they cannot together pass the budget", async () => {
    const { effect, spent } = paidTool();
    const f = flow$("fan", async (ctx) =>
      ctx.parallel(
        Array.from(
          { length: 10 },
          () => async (c: typeof ctx) => c.execute(effect, null, { retry: false }).catch(refusedOr),
        ),
      ),
    );
    const r = runtime();
    const out = await (
      await r.start(f, undefined, { id: "fan", budget: { tokens: 1000 } })
    ).result();
    expect(out.status).toBe("completed");
    expect(spent.real).toBeLessThanOrEqual(1000 + COST);
    expect(spent.real).toBe(900); // three fit; the fourth would pass the budget with them
    const log = await recorded(r, "fan");
    expect(log.tokens).toBeLessThanOrEqual(spent.real);
    expect(log.quotaFacts).toBe(7);
  });

  it("a nested budget holds across the parallel branches inside it", async () => {
    const { effect, spent } = paidTool();
    const f = flow$("nested-fan", async (ctx) =>
      ctx.nestedBudget("tools", { tokens: 600 }, (inner) =>
        inner.parallel(
          Array.from(
            { length: 5 },
            () => async (c: typeof ctx) =>
              c.execute(effect, null, { retry: false }).catch(refusedOr),
          ),
        ),
      ),
    );
    const r = runtime();
    const out = await (await r.start(f, undefined, { id: "nf" })).result();
    expect(out.output).toEqual([COST, COST, "refused", "refused", "refused"]);
    expect(spent.real).toBe(600);
  });

  it("retries: every attempt passes admission against what the failed ones spent", async () => {
    let real = 0;
    const flaky = {
      name: "flaky",
      reserve: () => ({ tokens: { output: COST } }),
      run: async (_: null, ectx: { meter(d: object): void }) => {
        real += COST;
        ectx.meter({ tokens: { output: COST } });
        throw new Error("the provider failed after charging");
      },
    };
    const f = flow$("retries", async (ctx) =>
      ctx
        .execute(flaky, null, { retry: { maxAttempts: 10, initialDelayMs: 1, jitter: 0 } })
        .catch(refusedOr),
    );
    const r = runtime();
    const out = await (
      await r.start(f, undefined, { id: "rt", budget: { tokens: 1000 } })
    ).result();
    expect(out.output).toBe("refused");
    expect(real).toBeLessThanOrEqual(1000 + COST);
    expect((await recorded(r, "rt")).tokens).toBeLessThanOrEqual(real);
  });

  it("parallel LLM calls: each holds its prompt and maxTokens, so a token budget bounds what the provider bills", async () => {
    const fake = await fakeAnthropic({ text: "x".repeat(1600), deltaChars: 400, inputTokens: 10 });
    servers.push(fake);
    const llm = anthropicEffect({ model: "claude-sonnet-4-6", baseURL: fake.baseURL });
    const f = flow$("llm-fan", async (ctx) =>
      ctx.parallel(
        Array.from(
          { length: 8 },
          () => async (c: typeof ctx) =>
            c
              .execute(
                llm,
                { messages: [{ role: "user", content: "hi" }], maxTokens: 500 },
                {
                  retry: false,
                },
              )
              .then((res) => res.usage.inputTokens + res.usage.outputTokens)
              .catch(refusedOr),
        ),
      ),
    );
    const r = runtime();
    const budget = 1600;
    const out = await (
      await r.start(f, undefined, { id: "lf", budget: { tokens: budget } })
    ).result();
    const answered = (out.output ?? []).filter((x): x is number => typeof x === "number");
    const billed = answered.reduce((a, b) => a + b, 0);
    const reservation = 1 + 500; // "hi" at characters / 4, plus maxTokens
    expect(answered.length).toBeGreaterThan(0);
    expect(fake.requests.length).toBe(answered.length);
    expect(billed).toBeLessThanOrEqual(budget + reservation);
    expect((await recorded(r, "lf")).quotaFacts).toBe(8 - answered.length);
  });

  it("a flow cannot choose its own negotiation ceiling: without an outside one, nothing past the budget is granted", async () => {
    const big = {
      name: "big",
      reserve: () => ({ tokens: { output: 500_000 } }),
      run: async (_: null, ectx: { meter(d: object): void }) => {
        ectx.meter({ tokens: { output: 500_000 } });
        return "ran";
      },
    };
    const f = flow$("greedy", async (ctx) => {
      const grant = await ctx.negotiateBudget("tokens", 1_000_000, { ceiling: 1_000_000 });
      const ran = await ctx.execute(big, null, { retry: false }).catch(refusedOr);
      return { grant, ran };
    });
    const r = runtime();
    const out = await (await r.start(f, undefined, { id: "g", budget: { tokens: 50 } })).result();
    expect(out.output).toEqual({ grant: 50, ran: "refused" });
    expect((await recorded(r, "g")).tokens).toBe(0);

    // The runtime's policy is the ceiling; the flow's own can only lower it.
    const policy = runtime({ negotiation: { tokens: { ceiling: 2000 } } });
    const asks = flow$("asks", async (ctx) => [
      await ctx.negotiateBudget("tokens", 5000, { ceiling: 1_000_000 }),
      await ctx.negotiateBudget("tokens", 5000, { ceiling: 700 }),
    ]);
    const granted = await (
      await policy.start(asks, undefined, { id: "a", budget: { tokens: 50 } })
    ).result();
    expect(granted.output).toEqual([2000, 700]);
    expect(() => runtime({ negotiation: { tokens: { ceiling: -1 } } })).toThrow(/ceiling/);
  });

  it("a child granted part of its parent's budget cannot negotiate past its grant, even under an outside ceiling", async () => {
    for (const negotiation of [undefined, { tokens: { ceiling: 100_000 } }]) {
      await childNegotiates(negotiation);
    }
  });

  async function childNegotiates(negotiation: RuntimeOptions["negotiation"]) {
    const { effect, spent } = paidTool();
    const child = flow$("grantee", async (ctx) => {
      const grant = await ctx.negotiateBudget("tokens", 5000, { ceiling: 100_000 });
      const results: unknown[] = [];
      for (let i = 0; i < 20; i++) {
        results.push(await ctx.execute(effect, null, { retry: false }).catch(refusedOr));
        if (results.at(-1) === "refused") break;
      }
      return { grant, calls: results.length };
    });
    const parent = flow$("grantor", async (ctx) => {
      const h = await ctx.spawn(child, undefined, { budget: { tokens: 700 } });
      return ctx.awaitChild(h);
    });
    const r = runtime(negotiation === undefined ? {} : { negotiation });
    r.registerFlow(child);
    const out = await (
      await r.start(parent, undefined, { id: "gp", budget: { tokens: 1000 } })
    ).result();
    expect(out.status).toBe("completed");
    expect(out.output?.grant).toBe(700);
    expect(spent.real).toBeLessThanOrEqual(700);
    expect(spent.real).toBeLessThanOrEqual(1000 + COST);
    const state = await r.getState("gp");
    expect(state._resources?.tokens?.output).toBe(spent.real);
  }

  it("children spawned at once without a budget of their own share their parent's: each is granted what is left", async () => {
    const { effect, spent } = paidTool();
    const child = flow$("spender-child", async (ctx) => {
      for (let i = 0; i < 20; i++) {
        if ((await ctx.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused") {
          return i;
        }
      }
      return 20;
    });
    const parent = flow$("spawner", async (ctx) => {
      const handles = await ctx.parallel(
        [0, 1, 2].map((key) => (c: typeof ctx) => c.spawn(child, undefined, { key: `c${key}` })),
      );
      return ctx.parallel(handles.map((h) => (c: typeof ctx) => c.awaitChild(h)));
    });
    const r = runtime();
    r.registerFlow(child);
    const out = await (
      await r.start(parent, undefined, { id: "sp", budget: { tokens: 1000 } })
    ).result();
    expect(out.status).toBe("completed");
    expect(spent.real).toBeLessThanOrEqual(1000 + COST);
    expect(spent.real).toBeGreaterThan(0);
    expect((await recorded(r, "sp")).tokens).toBe(spent.real);
  });

  it("rotation: a chain carries what it spent into each generation, so continueAsNew does not reset the budget", async () => {
    const { effect, spent } = paidTool();
    const f = flow$("rotating", async (ctx, turn: number) => {
      const ran = await ctx.execute(effect, null, { retry: false }).catch(refusedOr);
      if (ran === "refused" || turn >= 20) return { turn, ran };
      return ctx.continueAsNew(turn + 1);
    });
    const r = runtime({ features: { continueAsNew: true } });
    r.registerFlow(f);
    await r.start(f, 0, { id: "rot", budget: { tokens: 1000 } });
    let head = "rot";
    for (let i = 0; i < 200; i++) {
      head = await r.followToHead("rot");
      const state = await r.getState(head);
      if (state.status === "completed") break;
      await new Promise((res) => setTimeout(res, 10));
    }
    const end = await r.waitForCompletion(head);
    expect(end.output).toMatchObject({ ran: "refused" });
    expect(spent.real).toBeLessThanOrEqual(1000 + COST);
    const last = await recorded(r, head);
    expect(last.tokens).toBe(spent.real);
    expect(last.quotaFacts).toBe(1);
  });

  it("a stream severed by its guard leaves a QUOTA_EXCEEDED fact with no middleware at all", async () => {
    const fake = await fakeAnthropic({ text: "y".repeat(4000), deltaChars: 40, inputTokens: 10 });
    servers.push(fake);
    const llm = anthropicEffect({
      model: "claude-sonnet-4-6",
      baseURL: fake.baseURL,
      guard: streamTokenBudget(100),
    });
    const f = flow$("severed", async (ctx) =>
      ctx
        .execute(llm, { messages: [{ role: "user", content: "talk" }] }, { retry: false })
        .then(() => "finished")
        .catch(refusedOr),
    );
    for (const middleware of [[], undefined]) {
      const r = runtime(middleware === undefined ? {} : { middleware });
      const id = middleware === undefined ? "sev-default" : "sev-bare";
      expect((await (await r.start(f, undefined, { id })).result()).output).toBe("refused");
      const facts = (await r.store.read(id, 0, 100)).filter((e) => e.kind === "QUOTA_EXCEEDED");
      expect(facts).toHaveLength(1);
      const payload = facts[0]?.payload as { dimension?: unknown; callId?: unknown } | undefined;
      expect(payload?.dimension).toBe("tokens");
      expect(typeof payload?.callId).toBe("string");
    }
  });

  it("a model the price data cannot price is refused under a cost budget, unless it has a price or unpriced costs are allowed", async () => {
    const fake = await fakeAnthropic({ text: "priced?", inputTokens: 10 });
    servers.push(fake);
    const ask = { messages: [{ role: "user" as const, content: "hi" }], maxTokens: 50 };
    const flowOf = (llm: ReturnType<typeof anthropicEffect>) =>
      flow$("unpriced", async (ctx) =>
        ctx.execute(llm, ask, { retry: false }).then(
          (res) => res.price?.usd ?? "no price",
          (e: unknown) => (isLoomError(e) ? e.code : "other"),
        ),
      );
    const unknown = anthropicEffect({ model: "my-own-model-7", baseURL: fake.baseURL });
    // Room for the priced call's reservation (51 tokens at $1 and $2 per million), not more.
    const budget = { costUsd: 0.001 };
    const refusing = runtime();
    const refused = await (
      await refusing.start(flowOf(unknown), undefined, { id: "u1", budget })
    ).result();
    expect(refused.output).toBe("LOOM_PRICE_UNKNOWN");
    expect(fake.requests).toHaveLength(0);
    expect((await recorded(refusing, "u1")).quotaFacts).toBe(1);

    // With a price of its own, the call runs and its cost is metered.
    const priced = anthropicEffect({
      model: "my-own-model-7",
      baseURL: fake.baseURL,
      price: { inputPerMTok: 1, outputPerMTok: 2 },
    });
    const r2 = runtime();
    const out = await (await r2.start(flowOf(priced), undefined, { id: "u2", budget })).result();
    expect(typeof out.output).toBe("number");
    expect((await r2.getState("u2"))._resources?.costUsd).toBeGreaterThan(0);

    // Allowed by the runtime: it runs, with no price; and without a cost budget nothing is asked.
    const allowing = runtime({ unpricedCost: "allow" });
    const allowed = await (
      await allowing.start(flowOf(unknown), undefined, { id: "u3", budget })
    ).result();
    expect(allowed.output).toBe("no price");
    const free = await (await runtime().start(flowOf(unknown), undefined, { id: "u4" })).result();
    expect(free.output).toBe("no price");
    expect(fake.requests).toHaveLength(3);
  });

  it("a misspelled dimension is refused wherever a budget is given, before anything is appended", async () => {
    // Budgets as they come from a config file: the types cannot see the typo.
    const budget = (json: string) => JSON.parse(json) as Budget;
    const r = runtime();
    const f = flow$("typo", async (ctx) => ctx.run("x", () => 1));
    const refused = await r
      .start(f, undefined, { id: "t1", budget: budget('{"token":500}') })
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: "LOOM_INVALID_INPUT" });
    expect((refused as Error).message).toMatch(
      /unknown dimension "token" \(valid dimensions: tokens,/,
    );
    expect(await r.store.read("t1", 0, 10)).toEqual([]);
    expect(() => flow$("typo2", async () => 1, { budget: budget('{"cost":1}') })).toThrow(
      /unknown dimension "cost"/,
    );
    const inner = flow$("inner-typo", async (ctx) => {
      const nested = await ctx
        .nestedBudget("n", budget('{"tokenz":5}'), async () => "ran")
        .catch((e: unknown) => (isLoomError(e, "LOOM_INVALID_INPUT") ? "refused" : "other"));
      const spawned = await ctx
        .spawn(f, undefined, { budget: budget('{"tokens":5,"wall":1}') })
        .then(() => "spawned")
        .catch((e: unknown) => (isLoomError(e, "LOOM_INVALID_INPUT") ? "refused" : "other"));
      return { nested, spawned };
    });
    r.registerFlow(f);
    const out = await (await r.start(inner, undefined, { id: "t2" })).result();
    expect(out.output).toEqual({ nested: "refused", spawned: "refused" });
  });
});
