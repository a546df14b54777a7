/**
 * The simulator's workload: random flows built from steps (effects that meter tokens, take
 * simulated time, fail their first attempts, time out), decisions, sleeps, suspends with and
 * without a timeout, and parallel branches, under budgets and deadlines. A flow's shape is its
 * input, so one registered flow interprets every shape and a recovered run replays its own.
 */
import { flow$, step$, type EffectContext, type FlowContext } from "../src/index.ts";
import type { Prng } from "./prng.ts";

export type Op =
  | {
      op: "step";
      ms: number;
      tokens: number;
      fail: number;
      timeoutMs?: number;
      uncaught?: true;
    }
  | { op: "decide" }
  | { op: "sleep"; ms: number }
  | { op: "suspend"; timeoutMs?: number }
  | { op: "parallel"; branches: Op[][] };

export interface Spec {
  ops: Op[];
  budgetTokens?: number;
  deadlineMs?: number;
}

export const MAX_STEP_TOKENS = 30;
export const MAX_BRANCHES = 3;

export function randomSpec(prng: Prng): Spec {
  const ops = randomOps(prng, prng.int(1, 8), true);
  const spec: Spec = { ops };
  if (prng.chance(0.3)) spec.budgetTokens = prng.int(10, 120);
  if (prng.chance(0.15)) spec.deadlineMs = prng.int(200, 5000);
  return spec;
}

function randomOps(prng: Prng, n: number, top: boolean): Op[] {
  const ops: Op[] = [];
  for (let i = 0; i < n; i++) {
    const r = prng.next();
    if (r < 0.5) {
      const step: Op = {
        op: "step",
        ms: prng.int(0, 200),
        tokens: prng.int(0, MAX_STEP_TOKENS),
        fail: prng.chance(0.2) ? prng.int(1, 3) : 0,
      };
      if (prng.chance(0.15)) step.timeoutMs = prng.int(20, 400);
      // A failure the flow does not catch fails the execution (and a parallel's siblings stop).
      if (prng.chance(0.05)) step.uncaught = true;
      ops.push(step);
    } else if (r < 0.6) ops.push({ op: "decide" });
    else if (r < 0.72) ops.push({ op: "sleep", ms: prng.int(1, 2000) });
    else if (r < 0.84) {
      ops.push(
        prng.chance(0.4) ? { op: "suspend", timeoutMs: prng.int(50, 3000) } : { op: "suspend" },
      );
    } else if (top) {
      const branches: Op[][] = [];
      for (let b = prng.int(2, MAX_BRANCHES); b > 0; b--)
        branches.push(randomOps(prng, prng.int(1, 3), false));
      ops.push({ op: "parallel", branches });
    } else ops.push({ op: "decide" });
  }
  return ops;
}

/** What the world sees of the effects: who ran, when, and whether it was allowed to. */
export interface EffectWorld {
  /** Called when an effect starts; throws nothing, records a violation if the run is not allowed. */
  begin(executionId: string, stepId: string): Promise<void>;
  end(executionId: string, stepId: string): void;
  /** A value for ctx.decide: from the seed, in call order. */
  decision(): number;
}

export function simFlow(world: EffectWorld) {
  const work = step$(
    "work",
    async (input: { ms: number; tokens: number; fail: number }, ectx: EffectContext) => {
      await world.begin(ectx.executionId, ectx.stepId);
      try {
        ectx.meter({ tokens: { input: input.tokens, output: 0 } });
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, input.ms);
          ectx.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            reject(new Error("aborted"));
          });
        });
        if (ectx.attempt <= input.fail) throw new Error(`flaky attempt ${ectx.attempt}`);
        return ectx.attempt;
      } finally {
        world.end(ectx.executionId, ectx.stepId);
      }
    },
  );

  async function interpret(ctx: FlowContext, ops: Op[]): Promise<number> {
    let n = 0;
    for (const o of ops) {
      switch (o.op) {
        case "step": {
          const options = { retry: { initialDelayMs: 10, maxDelayMs: 50, maxAttempts: 3 } };
          const opts = o.timeoutMs === undefined ? options : { ...options, timeoutMs: o.timeoutMs };
          const call = ctx.execute(work, { ms: o.ms, tokens: o.tokens, fail: o.fail }, opts);
          n += o.uncaught ? await call : await call.catch(() => 0);
          break;
        }
        case "decide":
          n += await ctx.decide("d", () => world.decision());
          break;
        case "sleep":
          await ctx.sleep(o.ms);
          break;
        case "suspend": {
          const options = o.timeoutMs === undefined ? {} : { timeout: o.timeoutMs };
          n += await ctx.suspend<number>(options).then(
            (v) => (typeof v === "number" ? v : 0),
            () => 0,
          );
          break;
        }
        case "parallel": {
          const sums = await ctx.parallel(
            o.branches.map((b) => (c: FlowContext) => interpret(c, b)),
          );
          n += sums.reduce((a, b) => a + b, 0);
          break;
        }
      }
    }
    return n;
  }

  return flow$("sim", async (ctx, spec: Spec) => interpret(ctx, spec.ops));
}
