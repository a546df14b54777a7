/**
 * Red-team attacks on issue 20's promise: what the effects really spend (counted here, in the
 * fake effect) <= budget + one reservation; what the log records <= what was really spent; a
 * refusal leaves a QUOTA_EXCEEDED fact. Each test FAILS when the promise is broken.
 */
import { describe, expect, it } from "vitest";
import { flow$, type Runtime } from "../src/index.ts";
import { meteringMiddleware } from "../src/effects/middleware.ts";
import { COST, paidTool, refusedOrCode, spendRuntimes } from "./support/spend.ts";

const runtime = spendRuntimes();
const paid = paidTool;
const refusedOr = refusedOrCode;

async function recorded(r: Runtime, id: string) {
  const state = await r.getState(id);
  const t = state._resources?.tokens;
  const events = await r.store.read(id, 0, 100_000);
  return {
    tokens: (t?.input ?? 0) + (t?.output ?? 0),
    scopes: state._scopeResources,
    quotaFacts: events.filter((e) => e.kind === "QUOTA_EXCEEDED").length,
    state,
    events,
  };
}

function report(name: string, numbers: Record<string, unknown>) {
  console.log(`[attack] ${name}: ${JSON.stringify(numbers)}`);
}

describe("attacks on issue 20", () => {
  it("A1 a call its timeout cuts short is charged its reservation, so sequential timed-out calls cannot spend past the budget", async () => {
    const { effect, spent } = paid({ holdMs: 40, honorAbort: true });
    const f = flow$("timeouts", async (ctx) => {
      const out: unknown[] = [];
      for (let i = 0; i < 10; i++) {
        out.push(await ctx.execute(effect, null, { retry: false, timeoutMs: 10 }).catch(refusedOr));
        if (out.at(-1) === "refused") break;
      }
      return out;
    });
    const r = runtime();
    const budget = 1000;
    const out = await (
      await r.start(f, undefined, { id: "to", budget: { tokens: budget } })
    ).result();
    const log = await recorded(r, "to");
    report("A1 timeout", {
      budget,
      reservation: COST,
      real: spent.real,
      recorded: log.tokens,
      out: out.output,
      quotaFacts: log.quotaFacts,
    });
    expect(log.tokens).toBeLessThanOrEqual(spent.real);
    expect(spent.real).toBeLessThanOrEqual(budget + COST);
  });

  it("A2 a child spawned inside a nested budget is bounded by it", async () => {
    const { effect, spent } = paid();
    const child = flow$("nb-child", async (ctx) => {
      let n = 0;
      for (; n < 10; n++) {
        if ((await ctx.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused")
          break;
      }
      return n;
    });
    const parent = flow$("nb-parent", async (ctx) =>
      ctx.nestedBudget("tools", { tokens: 600 }, async (inner) => {
        const h = await inner.spawn(child, undefined);
        return inner.awaitChild(h);
      }),
    );
    const r = runtime();
    r.registerFlow(child);
    const out = await (await r.start(parent, undefined, { id: "nbp" })).result();
    const log = await recorded(r, "nbp");
    report("A2 nested+child", {
      nested: 600,
      reservation: COST,
      real: spent.real,
      recordedExec: log.tokens,
      recordedScope: log.scopes,
      out: out.output,
    });
    expect(spent.real).toBeLessThanOrEqual(600 + COST);
  });

  it("A2b with an execution budget too, the child's grant is the smaller of what each budget has left", async () => {
    const { effect, spent } = paid();
    const child = flow$("nb-child2", async (ctx) => {
      let n = 0;
      for (; n < 10; n++) {
        if ((await ctx.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused")
          break;
      }
      return n;
    });
    const parent = flow$("nb-parent2", async (ctx) =>
      ctx.nestedBudget("tools", { tokens: 600 }, async (inner) => {
        const h = await inner.spawn(child, undefined);
        return inner.awaitChild(h);
      }),
    );
    const r = runtime();
    r.registerFlow(child);
    const out = await (
      await r.start(parent, undefined, { id: "nbp2", budget: { tokens: 3000 } })
    ).result();
    const log = await recorded(r, "nbp2");
    report("A2b nested+child+exec", {
      nested: 600,
      exec: 3000,
      reservation: COST,
      real: spent.real,
      recordedExec: log.tokens,
      recordedScope: log.scopes,
      out: out.output,
    });
    expect(spent.real).toBeLessThanOrEqual(600 + COST);
  });

  it("A3 a spawn's grant leaves out what calls in flight hold", async () => {
    const { effect, spent } = paid({ holdMs: 100 });
    const { effect: childEffect, spent: childSpent } = paid({ holdMs: 1 });
    const child = flow$("grab", async (ctx) => {
      let n = 0;
      for (; n < 20; n++) {
        if ((await ctx.execute(childEffect, null, { retry: false }).catch(refusedOr)) === "refused")
          break;
      }
      return n;
    });
    const parent = flow$("inflight-spawn", async (ctx) =>
      ctx.parallel([
        ...[0, 1, 2].map(
          () => async (c: typeof ctx) => c.execute(effect, null, { retry: false }).catch(refusedOr),
        ),
        async (c: typeof ctx) => {
          await c.sleep(20);
          const h = await c.spawn(child, undefined);
          return c.awaitChild(h);
        },
      ]),
    );
    const r = runtime();
    r.registerFlow(child);
    const budget = 1000;
    const out = await (
      await r.start(parent, undefined, { id: "ifs", budget: { tokens: budget } })
    ).result();
    const log = await recorded(r, "ifs");
    const real = spent.real + childSpent.real;
    report("A3 inflight+spawn", {
      budget,
      reservation: COST,
      real,
      parentReal: spent.real,
      childReal: childSpent.real,
      recorded: log.tokens,
      out: out.output,
    });
    expect(log.tokens).toBeLessThanOrEqual(real);
    expect(real).toBeLessThanOrEqual(budget + COST);
  });

  for (const [label, reserve] of [
    ["NaN", () => ({ tokens: { output: Number.NaN } })],
    ["negative", () => ({ tokens: { output: -300 } })],
    ["empty", () => ({})],
    ["string", () => ({ tokens: { output: "300" } })],
    ["Infinity", () => ({ tokens: { output: Infinity } })],
  ] as const) {
    it(`A4 a reservation that is not finite amounts >= 0 (${label}) is refused before anything runs`, async () => {
      const { effect, spent } = paid({ reserve: reserve });
      const f = flow$("garbage", async (ctx) =>
        ctx.parallel(
          Array.from(
            { length: 10 },
            () => async (c: typeof ctx) =>
              c.execute(effect, null, { retry: false }).catch(refusedOr),
          ),
        ),
      );
      const r = runtime();
      const budget = 1000;
      const out = await (
        await r.start(f, undefined, { id: "g", budget: { tokens: budget } })
      ).result();
      const log = await recorded(r, "g");
      report(`A4 reserve ${label}`, {
        budget,
        real: spent.real,
        recorded: log.tokens,
        out: out.output,
        status: out.status,
      });
      expect(spent.real).toBeLessThanOrEqual(budget + COST);
    });
  }

  it("A6 a custom chain without admission (middleware: [meteringMiddleware()]) still holds the budget", async () => {
    const { effect, spent } = paid();
    const f = flow$("nochain", async (ctx) => {
      let n = 0;
      for (; n < 10; n++) {
        if ((await ctx.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused")
          break;
      }
      return n;
    });
    const r = runtime({ middleware: [meteringMiddleware()] });
    const budget = 1000;
    const out = await (
      await r.start(f, undefined, { id: "nc", budget: { tokens: budget } })
    ).result();
    const log = await recorded(r, "nc");
    report("A6 no admission", {
      budget,
      real: spent.real,
      recorded: log.tokens,
      out: out.output,
      quotaFacts: log.quotaFacts,
    });
    expect(spent.real).toBeLessThanOrEqual(budget + COST);
  });

  it("A7 a nested budget named __proto__ is refused, so nothing runs unbounded under it", async () => {
    const { effect, spent } = paid();
    const f = flow$("proto", async (ctx) =>
      ctx.nestedBudget("__proto__", { tokens: 600 }, async (inner) => {
        let n = 0;
        for (; n < 10; n++) {
          if ((await inner.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused")
            break;
        }
        return n;
      }),
    );
    const r = runtime();
    const out = await (await r.start(f, undefined, { id: "pr" })).result();
    const log = await recorded(r, "pr");
    report("A7 __proto__ nested", {
      nested: 600,
      real: spent.real,
      recorded: log.tokens,
      out: out.output,
      status: out.status,
    });
    expect(spent.real).toBeLessThanOrEqual(600 + COST);
  });

  it("A8 a nested budget named like an Object.prototype member (constructor, toString) is charged like any other", async () => {
    for (const name of ["constructor", "toString", "hasOwnProperty"]) {
      const { effect, spent } = paid();
      const f = flow$("protoish", async (ctx) =>
        ctx.nestedBudget(name, { tokens: 600 }, async (inner) => {
          let n = 0;
          for (; n < 10; n++) {
            if (
              (await inner.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused"
            )
              break;
          }
          return n;
        }),
      );
      const r = runtime();
      const out = await (await r.start(f, undefined, { id: `pi-${name}` })).result();
      report(`A8 ${name}`, { nested: 600, real: spent.real, out: out.output, status: out.status });
      expect(spent.real).toBeLessThanOrEqual(600 + COST);
    }
  });
});
