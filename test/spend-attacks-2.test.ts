/**
 * Red-team attacks on issue 20, second batch: floating calls across ends, rotation, children,
 * crashes, in-doubt steps, re-entrancy, kernel-shaped content. Each test FAILS when the promise
 * (real <= budget + one reservation; recorded <= real; a refusal leaves QUOTA_EXCEEDED) breaks.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, type Runtime } from "../src/index.ts";
import { defaultMiddleware, type EffectMiddleware } from "../src/effects/middleware.ts";
import { until } from "./helpers.ts";
import { COST, paidTool, refusedOrCode, spendRuntimes, tokensOf } from "./support/spend.ts";

const runtime = spendRuntimes();
/** Runtimes a test makes itself (two on one store, say), closed after it. */
const open: Runtime[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});
type Ectx = { meter(d: object): void; signal: AbortSignal };
const paid = (name = "paid", holdMs = 5) => paidTool({ name, holdMs });
const refusedOr = refusedOrCode;

function report(name: string, numbers: Record<string, unknown>) {
  console.log(`[attack] ${name}: ${JSON.stringify(numbers)}`);
}

describe("attacks on issue 20, batch 2", () => {
  it("B1 a child whose body ends before its calls are admitted: they never run, and its parent grants again only what is left", async () => {
    const { effect, spent } = paid("floating-child", 50);
    // Three calls in flight (900 held of a 1000 grant), then the body returns at once.
    const child = flow$("leaver", async (ctx) => {
      void ctx
        .parallel([0, 1, 2].map(() => (c: typeof ctx) => c.execute(effect, null, { retry: false })))
        .catch(() => undefined);
      return "left";
    });
    const parent = flow$("respawner", async (ctx) => {
      const outs: unknown[] = [];
      for (let i = 0; i < 5; i++) {
        const h = await ctx.spawn(child, undefined, { key: `k${i}` });
        outs.push(await ctx.awaitChild(h).catch((e: unknown) => refusedOr(e)));
        await ctx.sleep(80); // let the children's calls finish (the provider bills them)
      }
      return outs;
    });
    const r = runtime();
    r.registerFlow(child);
    const budget = 1000;
    const out = await (
      await r.start(parent, undefined, { id: "rs", budget: { tokens: budget } })
    ).result();
    await new Promise((res) => setTimeout(res, 150));
    const rec = await tokensOf(r, "rs");
    report("B1 floating calls at a child's end", {
      budget,
      reservation: COST,
      real: spent.real,
      recorded: rec,
      out: out.output,
    });
    expect(rec).toBeLessThanOrEqual(spent.real);
    expect(spent.real).toBeLessThanOrEqual(budget + COST);
  });

  it("B2 a call in flight when the body ends: continueAsNew is refused (same scope), so rotation does not reset it", async () => {
    const { effect, spent } = paid("floating", 50);
    const f = flow$("floater", async (ctx, turn: number) => {
      void ctx.execute(effect, null, { retry: false }).catch(() => undefined);
      if (turn >= 9) return turn;
      return ctx.continueAsNew(turn + 1);
    });
    const r = runtime({ features: { continueAsNew: true } });
    r.registerFlow(f);
    await r.start(f, 0, { id: "fl", budget: { tokens: 1000 } });
    await new Promise((res) => setTimeout(res, 300));
    const head = await r.followToHead("fl");
    const s = await r.getState(head);
    report("B2 floating+rotation", { budget: 1000, real: spent.real, status: s.status, head });
    expect(spent.real).toBeLessThanOrEqual(1000 + COST);
  });

  it("B3 a granted child that rotates cannot negotiate past its grant in its successor", async () => {
    const { effect, spent } = paid("rot-child");
    const child = flow$("rot-grantee", async (ctx, turn: number) => {
      if (turn < 2) return ctx.continueAsNew(turn + 1);
      const grant = await ctx.negotiateBudget("tokens", 50_000, { ceiling: 100_000 });
      let n = 0;
      for (; n < 20; n++) {
        if ((await ctx.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused")
          break;
      }
      return { grant, n };
    });
    const parent = flow$("rot-grantor", async (ctx) => {
      const h = await ctx.spawn(child, 0, { budget: { tokens: 700 } });
      return ctx.awaitChild(h);
    });
    const r = runtime({
      features: { continueAsNew: true },
      negotiation: { tokens: { ceiling: 100_000 } },
    });
    r.registerFlow(child);
    const out = await (
      await r.start(parent, undefined, { id: "rg", budget: { tokens: 1000 } })
    ).result();
    const rec = await tokensOf(r, "rg");
    report("B3 rotated grantee", {
      budget: 1000,
      grant: 700,
      real: spent.real,
      recorded: rec,
      out: out.output,
      status: out.status,
    });
    expect(spent.real).toBeLessThanOrEqual(1000 + COST);
    expect(spent.real).toBeLessThanOrEqual(700);
  });

  it("B4 cancelling a parent while its children spend", async () => {
    const { effect, spent } = paid("slow-child", 200);
    const child = flow$("slow-spender", async (ctx) => {
      let n = 0;
      for (; n < 20; n++) {
        if ((await ctx.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused")
          break;
      }
      return n;
    });
    const parent = flow$("cancelled-parent", async (ctx) => {
      const hs = await ctx.parallel(
        [0, 1].map(
          (k) => (c: typeof ctx) => c.spawn(child, undefined, { key: `c${k}`, detached: k === 1 }),
        ),
      );
      return ctx.parallel(hs.map((h) => (c: typeof ctx) => c.awaitChild(h).catch(refusedOr)));
    });
    const r = runtime();
    r.registerFlow(child);
    const budget = 1000;
    await r.start(parent, undefined, { id: "cp", budget: { tokens: budget } });
    await until(() => spent.calls >= 2, 10_000);
    await r.cancel("cp", "stop");
    await new Promise((res) => setTimeout(res, 2500));
    const rec = await tokensOf(r, "cp");
    report("B4 cancel parent", {
      budget,
      reservation: COST,
      real: spent.real,
      recordedParent: rec,
    });
    expect(rec).toBeLessThanOrEqual(spent.real);
    expect(spent.real).toBeLessThanOrEqual(budget + COST);
  });

  it("B5 crash (runtime closed) mid parallel fan, recovered by another runtime on the same store", async () => {
    const store = memoryStore();
    let real = 0;
    let started = 0;
    const hang = {
      name: "hang",
      reserve: () => ({ tokens: { output: COST } }),
      run: async (_: null, ectx: Ectx) => {
        real += COST;
        started++;
        await new Promise((res, rej) => {
          const t = setTimeout(res, 300);
          ectx.signal.addEventListener("abort", () => {
            clearTimeout(t);
            rej(new Error("aborted", { cause: ectx.signal.reason }));
          });
        });
        ectx.meter({ tokens: { output: COST } });
        return COST;
      },
    };
    const f = flow$("fan-crash", async (ctx) =>
      ctx.parallel(
        Array.from(
          { length: 3 },
          () => (c: typeof ctx) => c.execute(hang, null, { retry: false }).catch(refusedOr),
        ),
      ),
    );
    const make = () => {
      const r = createRuntime({ store, closeStore: false, background: false, leaseTtlMs: 30 });
      r.registerFlow(f);
      return r;
    };
    const budget = 1000;
    let r = make();
    await r.start(f, undefined, { id: "fc", budget: { tokens: budget } });
    await until(() => started >= 3, 10_000);
    await r.close();
    await new Promise((res) => setTimeout(res, 60));
    r = make();
    open.push(r);
    await r.recoverAbandoned();
    const end = await r.waitForCompletion("fc");
    const rec = await tokensOf(r, "fc");
    const quota = (await r.readLog("fc")).filter((e) => e.kind === "QUOTA_EXCEEDED").length;
    report("B5 crash fan", {
      budget,
      reservation: COST,
      real,
      recorded: rec,
      out: end.output,
      quota,
    });
    expect(real).toBeLessThanOrEqual(budget + COST);
    expect(rec).toBeLessThanOrEqual(real);
  });

  it("B6 at-most-once step in doubt under a budget: charged its reservation, not re-run", async () => {
    const store = memoryStore();
    let real = 0;
    const once = {
      name: "once",
      reserve: () => ({ tokens: { output: COST } }),
      run: async (_: null, ectx: Ectx) => {
        real += COST;
        await new Promise((res, rej) => {
          const t = setTimeout(res, 300);
          ectx.signal.addEventListener("abort", () => {
            clearTimeout(t);
            rej(new Error("aborted", { cause: ectx.signal.reason }));
          });
        });
        ectx.meter({ tokens: { output: COST } });
        return COST;
      },
    };
    const f = flow$("amo", async (ctx) => {
      const a = await ctx.execute(once, null, { retry: false, atMostOnce: true }).catch(refusedOr);
      const b = await ctx.execute(once, null, { retry: false, atMostOnce: true }).catch(refusedOr);
      return [a, b];
    });
    const make = () => {
      const r = createRuntime({ store, closeStore: false, background: false, leaseTtlMs: 30 });
      r.registerFlow(f);
      return r;
    };
    let r = make();
    await r.start(f, undefined, { id: "amo", budget: { tokens: 500 } });
    await until(() => real >= COST, 10_000);
    await r.close();
    await new Promise((res) => setTimeout(res, 60));
    r = make();
    open.push(r);
    await r.recoverAbandoned();
    const end = await r.waitForCompletion("amo");
    const rec = await tokensOf(r, "amo");
    report("B6 in-doubt", { budget: 500, reservation: COST, real, recorded: rec, out: end.output });
    expect(real).toBeLessThanOrEqual(500 + COST);
    expect(rec).toBeLessThanOrEqual(real);
  });

  it("B7 a re-entrant ctx.execute from inside an effect's run is refused", async () => {
    const { effect: inner, spent } = paid("inner");
    let captured: { execute: (e: unknown, i: null, o: object) => Promise<unknown> } | undefined;
    const outer = {
      name: "outer",
      reserve: () => ({ tokens: { output: COST } }),
      run: async (_: null, ectx: Ectx) => {
        spent.real += COST;
        const outs: unknown[] = [];
        for (let i = 0; i < 6; i++)
          outs.push(
            await captured!
              .execute(inner, null, { retry: false })
              .catch((e: unknown) => String((e as Error).message ?? e)),
          );
        ectx.meter({ tokens: { output: COST } });
        return outs;
      },
    };
    const f = flow$("reentrant", async (ctx) => {
      captured = ctx as never;
      return ctx.execute(outer, null, { retry: false }).catch(refusedOr);
    });
    const r = runtime();
    const out = await (
      await r.start(f, undefined, { id: "re", budget: { tokens: 1000 } })
    ).result();
    const rec = await tokensOf(r, "re");
    report("B7 re-entrant", {
      budget: 1000,
      real: spent.real,
      recorded: rec,
      out: out.output,
      status: out.status,
    });
    expect(spent.real).toBeLessThanOrEqual(1000 + COST);
    expect(rec).toBeLessThanOrEqual(spent.real);
  });

  it("B8 kernel-shaped content: a meter and an output shaped like a crashed-attempt charge", async () => {
    let real = 0;
    const sly = {
      name: "sly",
      reserve: () => ({ tokens: { output: COST } }),
      run: async (_: null, ectx: Ectx) => {
        real += COST;
        ectx.meter({
          tokens: { output: COST },
          estimated: "crashed-attempt",
          callId: "other",
          budgets: ["x"],
        });
        return {
          estimated: "crashed-attempt",
          reserved: { delta: { tokens: { output: -1e9 } } },
          delta: { tokens: { output: -5000 } },
        };
      },
    };
    const f = flow$("sly", async (ctx) => {
      let n = 0;
      for (; n < 10; n++) {
        if ((await ctx.execute(sly, null, { retry: false }).catch(refusedOr)) === "refused") break;
      }
      return n;
    });
    const r = runtime();
    await (
      await r.start(
        f,
        {
          reserved: { delta: { tokens: { output: 0 } } },
          granted: true,
          parent: { executionId: "p", callId: "c", granted: true },
        } as never,
        { id: "sly", budget: { tokens: 1000 } },
      )
    ).result();
    const rec = await tokensOf(r, "sly");
    report("B8 kernel-shaped", { budget: 1000, real, recorded: rec });
    expect(real).toBeLessThanOrEqual(1000 + COST);
    expect(rec).toBeLessThanOrEqual(real);
  });

  it("B9 a middleware cannot emit a $negotiate decision to raise the budget", async () => {
    const { effect, spent } = paid("mw");
    let raised = false;
    const raise: EffectMiddleware = async (ctx, next) => {
      if (!raised) {
        raised = true;
        // As a JavaScript middleware could: the types forbid the kind, the runtime must too.
        const emit = ctx.emit.bind(ctx) as (kind: string, payload: Record<string, unknown>) => void;
        emit("DECISION_RECORDED", {
          callId: "ghost/$forged#0",
          scope: "ghost",
          name: "$negotiate",
          value: { dimension: "tokens", limit: 1e9 },
        });
      }
      return next();
    };
    const f = flow$("mwf", async (ctx) => {
      let n = 0;
      for (; n < 10; n++) {
        if ((await ctx.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused")
          break;
      }
      return n;
    });
    const r = runtime({ middleware: [raise, ...defaultMiddleware()] });
    const out = await (
      await r.start(f, undefined, { id: "mw", budget: { tokens: 1000 } })
    )
      .result()
      .catch((e: unknown) => ({ output: String(e), status: "threw" }));
    const s = await r.getState("mw");
    report("B9 middleware emit", {
      budget: 1000,
      real: spent.real,
      budgetAfter: s._budget,
      out: out.output,
      status: out.status,
    });
    expect(spent.real).toBeLessThanOrEqual(1000 + COST);
  });

  it("B10 a detached child outlives its parent's rotation: the successor still counts its grant", async () => {
    const { effect, spent } = paid("det", 30);
    const child = flow$("det-child", async (ctx) => {
      let n = 0;
      for (; n < 20; n++) {
        if ((await ctx.execute(effect, null, { retry: false }).catch(refusedOr)) === "refused")
          break;
      }
      return n;
    });
    const parent = flow$("det-parent", async (ctx, turn: number) => {
      await ctx.spawn(child, undefined, { key: `d${turn}`, detached: true });
      if (turn >= 3) return turn;
      return ctx.continueAsNew(turn + 1);
    });
    const r = runtime({ features: { continueAsNew: true } });
    r.registerFlow(child);
    r.registerFlow(parent);
    await r.start(parent, 0, { id: "dp", budget: { tokens: 1000 } });
    await new Promise((res) => setTimeout(res, 2000));
    report("B10 detached+rotation", { budget: 1000, real: spent.real });
    expect(spent.real).toBeLessThanOrEqual(1000 + COST);
  });
});
