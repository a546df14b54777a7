/**
 * The simulator's workload: random flows built from steps (effects that meter tokens, take
 * simulated time, fail their first attempts, time out), decisions, sleeps, suspends with and
 * without a timeout, and parallel branches, under budgets and deadlines. Some flows are
 * conversations (ADR 0109, 0110): after their ops they take a number of turns, each a
 * `ctx.receive` and a few ops, and continue as new every few turns, carrying their place; the
 * operator's sends for them are drawn here too (`randomSends`). A flow's shape is its input (a
 * successor's input is the carry, the same shape), so one registered flow interprets every shape
 * and a recovered run replays its own. A spawn op (drawn in child-workload.ts) spawns children,
 * which run a second flow, `sim-child`, on the same ops; a detached child a conversation does not
 * await travels in its carry, and its successor awaits it.
 *
 * The `work` effect spends its tokens in the world the moment an attempt begins (EffectWorld
 * `begin`, which counts them whether the attempt is later recorded, crashed, cancelled, aborted
 * or retried), and meters them at once. It reserves exactly that cost (Effect.reserve, issue 20),
 * not MAX_STEP_TOKENS: admission then holds what a call really spends, and a crashed attempt's
 * charge (C2) or a cancel's (C3) equals what it spent, so SIM4's bound on the real spend (one
 * reservation, MAX_STEP_TOKENS, past a budget) is tested tight. A reservation of the ceiling
 * would refuse calls the budget has room for and charge more than was spent: a weaker test.
 */
import {
  flow$,
  isLoomError,
  step$,
  type ChildHandle,
  type Effect,
  type EffectContext,
  type FlowContext,
  type SpawnOptions,
} from "../src/index.ts";
import type { ChildPlan, ChildSpec } from "./child-workload.ts";
import type { Prng } from "./prng.ts";

export type Op =
  | {
      op: "step";
      ms: number;
      tokens: number;
      fail: number;
      timeoutMs?: number;
      uncaught?: true;
      /** Calls this rate limiter (flow-control.ts), claiming `out` output tokens; meters `used`. */
      limiter?: string;
      out?: number;
      used?: number;
    }
  | { op: "decide" }
  | { op: "sleep"; ms: number }
  | { op: "suspend"; timeoutMs?: number }
  | { op: "parallel"; branches: Op[][] }
  /** Spawns the children in turn, then awaits those it should (child-workload.ts). */
  | { op: "spawn"; children: ChildPlan[] };

export interface Spec {
  ops: Op[];
  budgetTokens?: number;
  deadlineMs?: number;
  /** A conversation: after `ops`, the turns of a chain. */
  chain?: Conversation;
}

/** A chain's conversation: what each generation runs after the ops of generation 0. */
export interface Conversation {
  /** Turns before the flow returns; each receives one message (or times out). */
  turns: number;
  /** The flow continues as new after every `every` turns (unless it is done). */
  every: number;
  /** What a turn does after its receive. */
  turn: Op[];
  /** The receive's timeout, when it has one: a timed-out receive is a turn without a message. */
  receiveTimeoutMs?: number;
  /** The carry: what the generations before this one did (absent in generation 0). */
  done?: { turns: number; received: number; sum: number };
  /** Detached children the generation before spawned and left: this one awaits them first. */
  pending?: ChildHandle[];
}

/** What a conversation returns: how many messages it received, and what they added up to. */
export interface ConversationEnd {
  received: number;
  sum: number;
}

/** One message the operator sends to a conversation. */
export interface Send {
  /** When, after the chain was started. */
  atMs: number;
  /** The sender's key: a repeated key is a sender's retry, which dedupe drops. */
  key: string;
  /** The message: the turn's number, or DUPLICATE for a retry (which no flow may receive). */
  n: number;
  /** Addressed to a later generation's id (any the chain has by then) instead of the chain id. */
  toLater: boolean;
}

/** The message of a sender's retry: a flow that receives it received a message twice. */
export const DUPLICATE = -1000;

/** What one call of `work` spends at most: its reservation is never more (SIM4's slack). */
export const MAX_STEP_TOKENS = 30;
export const MAX_BRANCHES = 3;

export function randomSpec(prng: Prng): Spec {
  const ops = randomOps(prng, prng.int(1, 8), true);
  const spec: Spec = { ops };
  if (prng.chance(0.3)) spec.budgetTokens = prng.int(10, 120);
  if (prng.chance(0.15)) spec.deadlineMs = prng.int(200, 5000);
  if (prng.chance(0.3)) {
    spec.ops = spec.ops.slice(0, 2);
    const chain: Conversation = {
      turns: prng.int(1, 7),
      every: prng.int(1, 3),
      turn: randomOps(prng, prng.int(0, 2), true),
    };
    if (prng.chance(0.2)) chain.receiveTimeoutMs = prng.int(100, 3000);
    spec.chain = chain;
  }
  return spec;
}

/**
 * The operator's sends to a conversation: one message per turn, keyed by its turn, some spaced
 * out and some at once, and now and then a sender's retry of an earlier key.
 */
export function randomSends(prng: Prng, chain: Conversation): Send[] {
  const sends: Send[] = [];
  let atMs = 0;
  for (let i = 0; i < chain.turns; i++) {
    atMs += prng.chance(0.3) ? 0 : prng.int(1, 600);
    sends.push({ atMs, key: `m${i}`, n: i + 1, toLater: prng.chance(0.3) });
    if (prng.chance(0.2)) {
      const retryAtMs = atMs + prng.int(0, 1500);
      sends.push({ atMs: retryAtMs, key: `m${i}`, n: DUPLICATE, toLater: prng.chance(0.3) });
    }
  }
  return sends.sort((a, b) => a.atMs - b.atMs);
}

export function randomOps(prng: Prng, n: number, top: boolean): Op[] {
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
  /**
   * Called when an attempt of an effect starts, which spends `tokens` at once (SIM4 counts them);
   * throws nothing, records a violation if the run is not allowed.
   */
  begin(executionId: string, stepId: string, tokens: number): Promise<void>;
  end(executionId: string, stepId: string): void;
  /** A value for ctx.decide: from the seed, in call order. */
  decision(): number;
  /** An attempt of a limited call begins (limiter-invariants.ts); the answer is called at its end. */
  invoke(call: LimitedCall): () => void;
}

/** An attempt of a call to a limiter, as the world sees it (SIM18). */
export interface LimitedCall {
  limiter: string;
  executionId: string;
  stepId: string;
  attempt: number;
  inputTokens: number;
  outputTokens: number;
}

/** The input of the `work` effect: how long it takes, what it spends, how often it fails first. */
interface WorkInput {
  ms: number;
  tokens: number;
  fail: number;
  /** A limited call (flow-control.ts): its limiter, the output it claims and what it meters. */
  limiter?: string;
  out?: number;
  used?: number;
}

/** The flow children run (child-workload.ts): spawned by name, so a child can spawn too. */
export const CHILD_FLOW = "sim-child";

/** The flows of the simulator: `flow` (the operator's executions) and `child` (their children). */
export function simFlows(world: EffectWorld) {
  const run = step$("work", async (input: WorkInput, ectx: EffectContext) => {
    const used = input.used ?? 0;
    await world.begin(ectx.executionId, ectx.stepId, input.tokens + used);
    const { executionId, stepId, attempt } = ectx;
    const ended =
      input.limiter === undefined
        ? undefined
        : world.invoke({
            limiter: input.limiter,
            executionId,
            stepId,
            attempt,
            inputTokens: input.tokens,
            outputTokens: used,
          });
    try {
      ectx.meter({ tokens: { input: input.tokens, output: used } });
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
      ended?.();
      world.end(ectx.executionId, ectx.stepId);
    }
  });
  // Its exact cost (the module head says why); MAX_STEP_TOKENS stays the ceiling of one call.
  const work: Effect<WorkInput, number> = {
    ...run,
    reserve: (input) => ({ tokens: { input: input.tokens, output: input.used ?? 0 } }),
    limiter: (input) =>
      input.limiter === undefined
        ? undefined
        : { name: input.limiter, inputTokens: input.tokens, outputTokens: input.out ?? 0 },
  };

  /** Runs `ops`; the handles of detached children it spawns and does not await go to `left`. */
  async function interpret(ctx: FlowContext, ops: Op[], left?: ChildHandle[]): Promise<number> {
    let n = 0;
    for (const o of ops) {
      switch (o.op) {
        case "step": {
          const options = { retry: { initialDelayMs: 10, maxDelayMs: 50, maxAttempts: 3 } };
          const opts = o.timeoutMs === undefined ? options : { ...options, timeoutMs: o.timeoutMs };
          const input: WorkInput = { ms: o.ms, tokens: o.tokens, fail: o.fail };
          if (o.limiter !== undefined) {
            input.limiter = o.limiter;
            input.out = o.out ?? 0;
            input.used = o.used ?? 0;
          }
          const call = ctx.execute(work, input, opts);
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
            o.branches.map((b) => (c: FlowContext) => interpret(c, b, left)),
          );
          n += sums.reduce((a, b) => a + b, 0);
          break;
        }
        case "spawn":
          n += await spawn(ctx, o.children, left);
          break;
      }
    }
    return n;
  }

  async function spawn(ctx: FlowContext, plans: ChildPlan[], left?: ChildHandle[]) {
    const handles: ChildHandle[] = [];
    for (const plan of plans) {
      const options: SpawnOptions = {};
      if (plan.key !== undefined) options.key = plan.key;
      if (plan.detached) options.detached = true;
      if (plan.budgetTokens !== undefined) options.budget = { tokens: plan.budgetTokens };
      if (plan.deadlineMs !== undefined) options.deadlineMs = plan.deadlineMs;
      handles.push(await ctx.spawn(CHILD_FLOW, plan.spec, options));
    }
    let n = 0;
    for (const [i, plan] of plans.entries()) {
      const handle = handles[i];
      if (!handle) continue;
      if (plan.await) n += await awaited(ctx, handle);
      else if (plan.detached) left?.push(handle);
    }
    return n;
  }

  /** A child's output; a child that failed or was cancelled counts 0 (the flow catches it). */
  function awaited(ctx: FlowContext, handle: ChildHandle): Promise<number> {
    return ctx.awaitChild<number>(handle).then(
      (v) => (typeof v === "number" ? v : 0),
      (e: unknown) => {
        if (isLoomError(e, "LOOM_CHILD_FAILED")) return 0;
        throw e;
      },
    );
  }

  /** A conversation's turns from where the generations before left off (their carry). */
  async function converse(
    ctx: FlowContext,
    spec: Spec,
    chain: Conversation,
    sum: number,
    left: ChildHandle[],
  ): Promise<ConversationEnd> {
    let { turns, received } = chain.done ?? { turns: 0, received: 0 };
    sum += chain.done?.sum ?? 0;
    // The detached children a predecessor left, awaited from the carry (O7).
    for (const handle of chain.pending ?? []) sum += await awaited(ctx, handle);
    const options = chain.receiveTimeoutMs === undefined ? {} : { timeout: chain.receiveTimeoutMs };
    while (turns < chain.turns) {
      try {
        sum += await ctx.receive<number>(options);
        received++;
      } catch (e) {
        // A timeout is the flow's to catch; any other failure is the runtime's, not the flow's.
        if (!isLoomError(e, "LOOM_SUSPEND_TIMEOUT")) throw e;
      }
      turns++;
      sum += await interpret(ctx, chain.turn, left);
      if (turns % chain.every === 0 && turns < chain.turns) {
        const next: Conversation = { ...chain, done: { turns, received, sum } };
        delete next.pending;
        // In the order of their ids: branches may finish in another order when replayed.
        if (left.length > 0) next.pending = [...left].sort((a, b) => (a.id < b.id ? -1 : 1));
        return ctx.continueAsNew({ ...spec, ops: [], chain: next });
      }
    }
    return { received, sum };
  }

  const flow = flow$("sim", async (ctx, spec: Spec) => {
    const left: ChildHandle[] = [];
    const n = await interpret(ctx, spec.ops, left);
    return spec.chain ? converse(ctx, spec, spec.chain, n, left) : n;
  });

  /** A child: its ops in each generation, `rotations` times continued as new, then its end. */
  const child = flow$(CHILD_FLOW, async (ctx, spec: ChildSpec) => {
    const generation = spec.generation ?? 0;
    const n = (spec.sum ?? 0) + (await interpret(ctx, spec.ops));
    if (generation < spec.rotations) {
      return ctx.continueAsNew({ ...spec, generation: generation + 1, sum: n });
    }
    if (spec.fail) throw new Error("the child fails, as its spec says");
    return n;
  });

  return { flow, child };
}
