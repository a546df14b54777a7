/**
 * `bench spend`'s paths on the paid tool (spend-fakes.ts), each under a budget of BUDGET tokens
 * unless it says otherwise, shaped as test/spend-paths.test.ts's. Every path spends until the
 * budget refuses; a path whose flow ends other than completed fails the bench.
 */
import { flow$, type FlowContext, type Outcome } from "../src/index.ts";
import {
  measure,
  paidTool,
  refusedOr,
  withRuntime,
  type PaidTool,
  type PathDriver,
} from "./spend-fakes.ts";

export const BUDGET = 1000;
/** Calls a loop makes at most: far past any budget here, so a loop ends by being refused. */
const MAX_CALLS = 20;

function completed<T>(path: string, outcome: Outcome<T>): T {
  if (outcome.status !== "completed") {
    throw new Error(`spend path ${path} ended ${outcome.status}: ${JSON.stringify(outcome.error)}`);
  }
  return outcome.output as T;
}

/** Calls the tool one after another until the budget refuses (or MAX_CALLS). */
async function spendUntilRefused(ctx: FlowContext, tool: PaidTool): Promise<number> {
  for (let i = 0; i < MAX_CALLS; i++) {
    const ran = await ctx.execute(tool.effect, null, { retry: false }).catch(refusedOr);
    if (ran === "refused") return i;
  }
  return MAX_CALLS;
}

/** Branches that each make one call of the tool, all in flight at once. */
const branches = (tool: PaidTool, n: number) =>
  Array.from(
    { length: n },
    () => async (c: FlowContext) => c.execute(tool.effect, null, { retry: false }).catch(refusedOr),
  );

/** (1) ctx.parallel with 10 branches, each one paid call. */
export const parallelPath: PathDriver = async (reserving) => {
  const tool = paidTool(reserving);
  const f = flow$("spend-parallel", async (ctx) => ctx.parallel(branches(tool, 10)));
  return withRuntime({}, async (r) => {
    const h = await r.start(f, undefined, { id: "parallel", budget: { tokens: BUDGET } });
    completed("parallel", await h.result());
    return measure(r, "parallel", BUDGET, tool);
  });
};

/** (2) A nested budget of BUDGET around 10 parallel branches; the execution has none. */
export const nestedPath: PathDriver = async (reserving) => {
  const tool = paidTool(reserving);
  const f = flow$("spend-nested", async (ctx) =>
    ctx.nestedBudget("tools", { tokens: BUDGET }, (inner) => inner.parallel(branches(tool, 10))),
  );
  return withRuntime({}, async (r) => {
    completed("nested", await (await r.start(f, undefined, { id: "nested" })).result());
    return measure(r, "nested", BUDGET, tool);
  });
};

/** (3) Retries of a call whose first 5 attempts fail after billing. */
export const retriesPath: PathDriver = async (reserving) => {
  const tool = paidTool(reserving, 5);
  const f = flow$("spend-retries", async (ctx) =>
    ctx
      .execute(tool.effect, null, { retry: { maxAttempts: 10, initialDelayMs: 1, jitter: 0 } })
      .catch(refusedOr),
  );
  return withRuntime({}, async (r) => {
    const h = await r.start(f, undefined, { id: "retries", budget: { tokens: BUDGET } });
    completed("retries", await h.result());
    return measure(r, "retries", BUDGET, tool);
  });
};

/**
 * (4) A child granted 700 of its parent's BUDGET negotiates 5,000 under an outside ceiling of
 * 100,000, then spends until refused. Its budget is its grant.
 */
export const childNegotiatesPath: PathDriver = async (reserving) => {
  const grant = 700;
  const tool = paidTool(reserving);
  const child = flow$("spend-grantee", async (ctx) => {
    await ctx.negotiateBudget("tokens", 5000, { ceiling: 100_000 });
    return spendUntilRefused(ctx, tool);
  });
  const parent = flow$("spend-grantor", async (ctx) =>
    ctx.awaitChild(await ctx.spawn(child, undefined, { budget: { tokens: grant } })),
  );
  return withRuntime({ negotiation: { tokens: { ceiling: 100_000 } } }, async (r) => {
    r.registerFlow(child);
    const h = await r.start(parent, undefined, { id: "grantor", budget: { tokens: BUDGET } });
    completed("child-negotiates", await h.result());
    return measure(r, "grantor", grant, tool);
  });
};

/** (5) A flow with a budget of 100 negotiates 1,000,000 under its own ceiling, and no outside one. */
export const negotiateOwnCeilingPath: PathDriver = async (reserving) => {
  const small = 100;
  const tool = paidTool(reserving);
  const f = flow$("spend-greedy", async (ctx) => {
    await ctx.negotiateBudget("tokens", 1_000_000, { ceiling: 1_000_000 });
    return spendUntilRefused(ctx, tool);
  });
  return withRuntime({}, async (r) => {
    const h = await r.start(f, undefined, { id: "greedy", budget: { tokens: small } });
    completed("negotiate-own-ceiling", await h.result());
    return measure(r, "greedy", small, tool);
  });
};

/** (6) Three children spawned at once, with no budget of their own, each spending until refused. */
export const childrenAtOncePath: PathDriver = async (reserving) => {
  const tool = paidTool(reserving);
  const child = flow$("spend-child", async (ctx) => spendUntilRefused(ctx, tool));
  const parent = flow$("spend-spawner", async (ctx) => {
    const handles = await ctx.parallel(
      [0, 1, 2].map((key) => (c: FlowContext) => c.spawn(child, undefined, { key: `c${key}` })),
    );
    return ctx.parallel(handles.map((h) => (c: FlowContext) => c.awaitChild(h)));
  });
  return withRuntime({}, async (r) => {
    r.registerFlow(child);
    const h = await r.start(parent, undefined, { id: "spawner", budget: { tokens: BUDGET } });
    completed("children-at-once", await h.result());
    return measure(r, "spawner", BUDGET, tool);
  });
};

/** (7) One call per generation, rotating with ctx.continueAsNew until refused. */
export const rotationPath: PathDriver = async (reserving) => {
  const tool = paidTool(reserving);
  const f = flow$("spend-rotating", async (ctx, turn: number) => {
    const ran = await ctx.execute(tool.effect, null, { retry: false }).catch(refusedOr);
    if (ran === "refused" || turn >= MAX_CALLS) return turn;
    return ctx.continueAsNew(turn + 1);
  });
  return withRuntime({ features: { continueAsNew: true } }, async (r) => {
    r.registerFlow(f);
    await r.start(f, 0, { id: "rot", budget: { tokens: BUDGET } });
    let head = "rot";
    for (let i = 0; i < 1000; i++) {
      head = await r.followToHead("rot");
      if ((await r.getState(head)).status === "completed") break;
      await new Promise((res) => setTimeout(res, 2));
    }
    completed("rotation", await r.waitForCompletion(head));
    return measure(r, head, BUDGET, tool);
  });
};
