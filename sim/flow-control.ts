/**
 * Flow control in the simulator's workload (issue 26): queues and rate limiters, drawn from a PRNG
 * of their own (`seed ^ 0xf10c`), so that the rest of a seed's workload is the one it drew before
 * (as forks and children do).
 *
 * About 3 seeds in 5 draw flow control (unless told: SimOptions.flowControl). Such a seed has one
 * or two queues (`q0`, `q1`: concurrency 1 to 3, keyConcurrency 1) and one or two limiters
 * (`llm0`, `llm1`: a window of 1 to 4 simulated seconds, 1 or 2 calls in flight, and some of
 * requests, input tokens, output tokens, tokens per window), which every runtime of the seed is
 * given alike (`queues`, `rateLimits`). Then:
 *
 * - about half the operator's starts wait in a queue, with a key drawn from three (mostly), now
 *   and then a priority (-2..2), and, for a flow that is no conversation, now and then a dedupe
 *   key or a debounce (a key drawn from two, 100 to 1500 ms, sometimes a `maxMs`): two starts of
 *   one debounce key close together make one execution, which runs the later start's spec;
 * - about a third of the steps (in generation 0's ops, a conversation's turns, parallel branches
 *   and children's ops alike) call a limiter: the `work` effect claims its input tokens and a
 *   drawn `out` of output tokens (a `maxTokens`), and meters `used` <= `out` of them, which it
 *   spends too (SIM4: input plus output stays within MAX_STEP_TOKENS). A limited step has a
 *   timeout (its own, else one drawn here): a grant counts toward `concurrent` until it is
 *   settled or until its hold, which is the step's timeout (rate-limits.ts HOLD_MS, ten minutes,
 *   without one), and a process that crashes mid-call never settles.
 */
import type { Envelope } from "../src/kernel/events.ts";
import { isPlainObject } from "../src/kernel/json.ts";
import type { QueueLimits } from "../src/store/spi.ts";
import type { RateLimitOptions } from "../src/runtime/rate-limits.ts";
import type { ChildSpec } from "./child-workload.ts";
import type { FlowTape } from "./limiter-invariants.ts";
import { Prng } from "./prng.ts";
import { MAX_STEP_TOKENS, type Op, type Spec } from "./workload.ts";

/** What a seed's runtimes are given, and the draws of its starts and steps. */
export interface FlowControl {
  enabled: boolean;
  queues: Record<string, QueueLimits>;
  rateLimits: Record<string, RateLimitOptions>;
  draw: Prng;
}

/** The queue options of one start (StartOptions), or a debounce instead of an id. */
export interface StartQueue {
  queue: string;
  key?: string;
  priority?: number;
  dedupe?: string;
  debounce?: { key: string; ms: number; maxMs?: number };
}

/** The flow control of `seed`: drawn about 3 times in 5, unless `forced` says whether. */
export function flowControlOf(seed: number, forced?: boolean): FlowControl {
  const draw = new Prng(seed ^ 0xf10c);
  const drawn = draw.chance(0.6);
  const enabled = forced ?? drawn;
  const control: FlowControl = { enabled, queues: {}, rateLimits: {}, draw };
  if (!enabled) return control;
  for (let i = draw.int(1, 2) - 1; i >= 0; i--) {
    control.queues[`q${i}`] = { concurrency: draw.int(1, 3), keyConcurrency: 1 };
  }
  for (let i = draw.int(1, 2) - 1; i >= 0; i--) {
    // Every limit is at least what one call claims (30 input, 40 output tokens): RL3 would refuse
    // a call that could never fit.
    const limit: RateLimitOptions = { windowMs: draw.int(1, 4) * 1000, concurrent: draw.int(1, 2) };
    if (draw.chance(0.5)) limit.rpm = draw.int(2, 6);
    if (draw.chance(0.5)) limit.inputTpm = draw.int(MAX_STEP_TOKENS, 90);
    if (draw.chance(0.5)) limit.outputTpm = draw.int(40, 80);
    if (draw.chance(0.3)) limit.tpm = draw.int(MAX_STEP_TOKENS + 40, 120);
    control.rateLimits[`llm${i}`] = limit;
  }
  return control;
}

/** The queue options of a start of `spec`, or undefined (it waits in no queue). */
export function drawStartQueue(control: FlowControl, spec: Spec): StartQueue | undefined {
  const { draw } = control;
  if (!control.enabled || !draw.chance(0.5)) return undefined;
  const at: StartQueue = { queue: draw.pick(Object.keys(control.queues)) };
  if (draw.chance(0.8)) at.key = draw.pick(["k0", "k1", "k2"]);
  if (draw.chance(0.3)) at.priority = draw.int(-2, 2);
  // A conversation is talked to by its id, which a debounce does not give and a dedupe may refuse.
  const r = draw.next();
  if (spec.chain === undefined && r < 0.12) at.dedupe = draw.pick(["d0", "d1"]);
  else if (spec.chain === undefined && r < 0.3) {
    const ms = draw.int(100, 1500);
    at.debounce = draw.chance(0.5)
      ? { key: draw.pick(["b0", "b1"]), ms, maxMs: ms * 2 }
      : {
          key: draw.pick(["b0", "b1"]),
          ms,
        };
  }
  return at;
}

/** Marks about a third of the steps of `spec` (children's included) to call a limiter. */
export function addLimiters(control: FlowControl, spec: Spec): void {
  if (!control.enabled) return;
  limit(control, spec.ops);
  if (spec.chain) limit(control, spec.chain.turn);
}

function limit(control: FlowControl, ops: Op[]): void {
  const { draw } = control;
  for (const o of ops) {
    if (o.op === "parallel") for (const b of o.branches) limit(control, b);
    else if (o.op === "spawn") for (const c of o.children) limitChild(control, c.spec);
    else if (o.op === "step" && draw.chance(0.35)) {
      o.limiter = draw.pick(Object.keys(control.rateLimits));
      o.used = draw.int(0, Math.min(15, MAX_STEP_TOKENS - o.tokens));
      o.out = o.used + draw.int(0, 10);
      o.timeoutMs ??= o.ms + draw.int(50, 800);
    }
  }
}

function limitChild(control: FlowControl, spec: ChildSpec): void {
  limit(control, spec.ops);
}

/** What a seed's flow control did, for its summary: that the seeds exercise what SIM17, SIM18 check. */
export interface FlowCounts {
  /** Executions that waited in a queue (their start put them there), and their admissions. */
  queued: number;
  admitted: number;
  /** Leases the admissions took: more than `admitted` when crashes or cancels lost some. */
  admissionLeases: number;
  /** Attempts of limited calls, asks the limiters refused (waits), and attempts never settled. */
  limitedCalls: number;
  limiterWaits: number;
  unsettledCalls: number;
  /** Crashes in a queue's or limiter's call, or while a limited call was running. */
  flowCrashes: number;
}

/** The counts of `logs` (every log of the run) and the tape. */
export function flowCounts(
  logs: ReadonlyMap<string, readonly Envelope[]>,
  tape: FlowTape,
  flowCrashes: number,
): FlowCounts {
  let queued = 0;
  let admitted = 0;
  for (const log of logs.values()) {
    const start = log[0];
    const q = isPlainObject(start?.payload) ? start.payload.queue : undefined;
    if (!isPlainObject(q) || q.admittedAt !== undefined || isPlainObject(start?.meta?.forkedFrom)) {
      continue;
    }
    queued++;
    if (log.some((e) => e.kind === "EXECUTION_ADMITTED")) admitted++;
  }
  return {
    queued,
    admitted,
    admissionLeases: tape.leases,
    limitedCalls: tape.attempts.length,
    limiterWaits: tape.refused,
    unsettledCalls: tape.unsettled,
    flowCrashes,
  };
}

/** A crash the flow control saw: in one of its calls, or with a limited call running. */
export function isFlowCrash(crashedIn: string | undefined, tape: FlowTape): boolean {
  const calls = /admitQueued|reserve|settle|withdraw|blockLimiter/;
  return (
    (crashedIn !== undefined && calls.test(crashedIn)) ||
    tape.attempts.some((a) => a.endMs === undefined)
  );
}
