/**
 * The deterministic simulator (TigerBeetle's VOPR is the model): one seed decides a workload, the
 * faults and the order of everything, on a simulated clock, so any failure is reproduced from its
 * seed alone.
 *
 * Every timer of the process (the runtime's loops, leases, deadlines, backoffs, the effects' own
 * waits) runs on @sinonjs/fake-timers, installed for the run; the memory store answers
 * synchronously; so the only order is the one the seed draws. A crash kills a simulated process
 * incarnation: its runtime stops at once and every later store call of it fails, and a fresh
 * runtime on the same data recovers from the store alone. Invariants: invariants.ts.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../src/kernel/json.ts";
import { createRuntime, type Runtime } from "../src/index.ts";
import { memoryStore } from "../src/store/memory/index.ts";
import { loadState } from "../src/runtime/load-state.ts";
import type { Envelope } from "../src/kernel/events.ts";
import { withFakeClock } from "./fake-clock.ts";
import { faultyStore, type FaultRates, type Incarnation } from "./faulty-store.ts";
import { CANCEL_GRACE_MS, cancelledAt, checkBudget, checkFold, checkLog } from "./invariants.ts";
import { Prng } from "./prng.ts";
import { randomSpec, simFlow, type Spec } from "./workload.ts";

export interface SimOptions {
  steps?: number;
  faults?: Partial<FaultRates>;
}

export interface SimResult {
  seed: number;
  violations: string[];
  /** Events appended to every log. */
  events: number;
  crashes: number;
  executions: number;
  /** A hash of every log: the same seed must give the same logs, byte for byte. */
  logHash: string;
  /** How the executions ended, by status. */
  ended: Record<string, number>;
  /** Every log, when the seed failed (`npm run sim -- ... --dump` prints them). */
  logs?: Record<string, Envelope[]>;
}

const DEFAULT_FAULTS: FaultRates = {
  crash: 0.004,
  transient: 0.004,
  delay: 0.2,
  maxDelayMs: 5,
  dropAfterAck: 0,
};

export async function runSeed(seed: number, options: SimOptions = {}): Promise<SimResult> {
  return withFakeClock(({ now, tick }) => simulate(seed, options, now, tick));
}

async function simulate(
  seed: number,
  options: SimOptions,
  now: () => number,
  tick: (ms: number) => Promise<unknown>,
): Promise<SimResult> {
  const prng = new Prng(seed);
  const faultPrng = new Prng(seed ^ 0x5eed);
  const rates = { ...DEFAULT_FAULTS, ...options.faults };
  const violations: string[] = [];
  const oracle = memoryStore();
  const specs = new Map<string, Spec>();
  const running = new Map<string, number>();
  const pending: Promise<unknown>[] = [];
  let crashes = 0;
  let decisions = 0;

  const flow = simFlow({
    async begin(executionId, stepId) {
      running.set(executionId, (running.get(executionId) ?? 0) + 1);
      const log = await oracle.read(executionId);
      const settled = log.find((e) => {
        const p = e.payload as { callId?: unknown; retrying?: unknown };
        if (p.callId !== stepId) return false;
        if (e.kind === "STEP_FAILED") return p.retrying !== true;
        return e.kind === "STEP_COMPLETED" || e.kind === "STEP_CANCELLED";
      });
      // A cancel is written by another process: its owner learns of it within its notice poll,
      // and may start an attempt until then (SIM5's grace); anything else settles in the owner.
      const grace = settled?.kind === "STEP_CANCELLED" && now() - settled.at <= CANCEL_GRACE_MS;
      if (settled && !grace) {
        violations.push(
          `SIM2 ${executionId}: step ${stepId} ran again after its ${settled.kind} was recorded`,
        );
      }
      const cancelled = cancelledAt(log);
      if (cancelled !== undefined && now() - cancelled > CANCEL_GRACE_MS) {
        violations.push(
          `SIM5 ${executionId}: step ${stepId} started ${now() - cancelled} ms after the cancel`,
        );
      }
    },
    end(executionId) {
      running.set(executionId, (running.get(executionId) ?? 1) - 1);
    },
    decision: () => ++decisions,
  });

  const clock = { now };
  // Snapshots every few events, so that loading through them is checked too (SIM3).
  const snapshotEvery = prng.int(1, 8);
  let generation = 0;
  const boot = (): { incarnation: Incarnation; runtime: Runtime } => {
    const me = generation++;
    const held: { runtime?: Runtime } = {};
    const incarnation = faultyStore(
      oracle.reopen(),
      faultPrng,
      rates,
      () => {
        crashes++;
        // The process is gone: its runtime stops at once (close stops every run synchronously).
        void held.runtime?.close();
      },
      undefined,
      // After every event the log gains.
      () => check(),
    );
    const runtime = createRuntime({
      store: incarnation.store,
      clock,
      ownerId: `process-${me}`,
      leaseTtlMs: 1000,
      pollIntervalMs: 50,
      noticePollMs: 20,
      snapshotEvery,
      closeStore: false,
      onError: () => undefined,
    });
    runtime.registerFlow(flow);
    held.runtime = runtime;
    return { incarnation, runtime };
  };
  let proc = boot();
  // An operator's process on the same store, without faults: resumes and cancels from outside.
  const admin = createRuntime({
    store: oracle.reopen(),
    clock,
    background: false,
    closeStore: false,
    ownerId: "operator",
  });
  const spawn = (p: Promise<unknown>) => pending.push(p.catch(() => undefined));
  const ids: string[] = [];
  const start = () => {
    const id = `sim-${seed}-${ids.length}`;
    const spec = randomSpec(prng);
    specs.set(id, spec);
    ids.push(id);
    const opts: { id: string; budget?: { tokens: number }; deadlineMs?: number } = { id };
    if (spec.budgetTokens !== undefined) opts.budget = { tokens: spec.budgetTokens };
    if (spec.deadlineMs !== undefined) opts.deadlineMs = spec.deadlineMs;
    spawn(proc.runtime.start(flow, spec, opts));
  };

  async function check(): Promise<void> {
    for (const id of ids) {
      const log = await oracle.read(id);
      if (log.length === 0) continue;
      checkLog(id, log, violations);
      checkFold(
        id,
        log,
        await loadState(oracle, id),
        proc.incarnation.dead ? undefined : proc.runtime.heldState(id),
        violations,
      );
      const at = cancelledAt(log);
      if (at !== undefined && now() - at > CANCEL_GRACE_MS && (running.get(id) ?? 0) > 0) {
        violations.push(
          `SIM5 ${id}: ${running.get(id)} effects still running ${now() - at} ms after the cancel`,
        );
      }
    }
  }

  for (let i = prng.int(1, 3); i > 0; i--) start();
  const steps = options.steps ?? 60;
  for (let step = 0; step < steps && violations.length === 0; step++) {
    const r = prng.next();
    if (r < 0.1 && ids.length < 6) start();
    else if (r < 0.25) {
      // From the operator's process, or from the owner's own (its cached, parked run).
      const from = prng.chance(0.5) ? admin : proc.runtime;
      spawn(from.resume(prng.pick(ids), prng.int(1, 9)));
    } else if (r < 0.29) {
      const from = prng.chance(0.5) ? admin : proc.runtime;
      spawn(from.cancel(prng.pick(ids), "simulated operator"));
    }
    await tick(prng.int(0, 250));
    if (proc.incarnation.dead) {
      await tick(prng.int(0, 1200));
      proc = boot();
    }
    await check();
  }
  // Drain: the world stops failing; answer every suspend and let time pass until all ends.
  rates.crash = 0;
  rates.transient = 0;
  rates.dropAfterAck = 0;
  for (let round = 0; round < 200 && violations.length === 0; round++) {
    if (proc.incarnation.dead) proc = boot();
    let open = 0;
    for (const id of ids) {
      const state = await loadState(oracle, id);
      if (!state || ["completed", "failed", "cancelled"].includes(state.status)) continue;
      open++;
      if (state._openSuspends.length > 0) spawn(admin.resume(id, 1));
    }
    if (open === 0) break;
    await tick(500);
    await check();
  }
  await check();
  const failedBefore = violations.length;
  let events = 0;
  const ended: Record<string, number> = {};
  for (const id of ids) {
    const state = await loadState(oracle, id);
    if (state) ended[state.status] = (ended[state.status] ?? 0) + 1;
    const log: Envelope[] = await oracle.read(id);
    events += log.length;
    if (!state) continue;
    // Liveness is judged only in a run that broke nothing else (a violation stops the drain).
    if (failedBefore === 0 && !["completed", "failed", "cancelled"].includes(state.status)) {
      violations.push(`SIM7 ${id}: still ${state.status} after the drain`);
    }
    const spec = specs.get(id);
    if (spec) checkBudget(id, spec, state, violations);
  }
  // Closing waits on the simulated clock too (a journal flush, a lease wait): keep it moving.
  const settle = async (work: Promise<unknown>) => {
    let done = false;
    void work.finally(() => (done = true));
    for (let i = 0; i < 10_000 && !done; i++) await tick(10);
    if (!done) violations.push("SIM7 the runtime did not close within 100 simulated seconds");
  };
  await settle(proc.runtime.close());
  await settle(admin.close());
  await settle(Promise.all(pending));
  const logs = await Promise.all(ids.map((id) => oracle.read(id)));
  const logHash = createHash("sha256").update(canonicalJson(logs)).digest("hex").slice(0, 16);
  return {
    seed,
    violations: [...new Set(violations)],
    events,
    crashes,
    executions: ids.length,
    logHash,
    ended,
    ...(violations.length > 0
      ? { logs: Object.fromEntries(ids.map((id, i) => [id, logs[i] ?? []])) }
      : {}),
  };
}
