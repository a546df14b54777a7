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
 *
 * Chains (ADR 0109): the runtimes run with `features.continueAsNew`, some flows are
 * conversations that continue as new every few turns, and the operator sends each its messages
 * (some twice, as a sender's retry) at their drawn times, to the chain's id or to a later
 * generation's. A chain is checked on one consistent read of all its generations' logs and its
 * inbox stream (a double collect: the read is taken again until nothing moved in between).
 *
 * Forks (issue 7): about one execution in five is forked by the operator, at a drawn time, at a
 * drawn sequence number of a drawn generation's log as it was then, to `<id>-fork<k>`, through
 * the operator's runtime (a refusal because the log had ended by then is fine). The fork is then
 * one more execution of the seed: recovered and driven by the owner's process, resumed,
 * cancelled, and, for a conversation, sent its own messages (to the fork's id: its stream is its
 * own), and checked as a chain of its own (SIM3, SIM7..SIM9, SIM11). The fork decisions draw from
 * a PRNG of their own, so the rest of a seed's workload is the one it drew before forks.
 *
 * Children (issue 8): about 2 flows in 5 spawn children (child-workload.ts), which the runtimes
 * supervise from the logs alone. Every execution of the child flow the store lists is one more
 * chain of the seed (a child may continue as new): checked like any other (SIM1..SIM10), and
 * against its parent (SIM12, SIM15); each chain's slots are checked (SIM13), and the end of the
 * run checks the cascades and the waits on children (SIM14). Now and then the operator resumes or
 * cancels a child, or cancels a child's parent (so it cascades), from a PRNG of its own. The
 * drain answers the suspends of every child except an attached one whose parent ended cancelled
 * or continued with its slot open: that one must be ended by the cascade.
 *
 * Fleets (issue 9; fleet.ts): about half the seeds run on a fleet's store with 1 to 3 owner
 * processes at once, which recover by claims and wake each other; one owner per fence (SIM16) is
 * checked on every seed.
 *
 * Flow control (issue 26; flow-control.ts): about 3 seeds in 5 give every runtime the same queues
 * and rate limiters; about half their starts wait in a queue (with keys, priorities, now and then
 * a dedupe or a debounce) and about a third of their steps call a limiter, all drawn from a PRNG of
 * their own. SIM17 (queue-invariants.ts) and SIM18 (limiter-invariants.ts) are checked at the end
 * of the run, on every log and every limited attempt, crashed processes' included.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../src/kernel/json.ts";
import {
  createRuntime,
  isLoomError,
  isTerminalStatus,
  type Runtime,
  type StartOptions,
} from "../src/index.ts";
import { memoryStore } from "../src/store/memory/index.ts";
import { loadState } from "../src/runtime/load-state.ts";
import { DEFAULT_TOPIC } from "../src/runtime/inbox.ts";
export { readChain, type LogCache } from "./chain-read.ts";
import { isTerminalEvent, type Envelope } from "../src/kernel/events.ts";
import { foldAll } from "../src/fold/fold.ts";
import { isWake } from "../src/runtime/supervisor.ts";
import { readChain, type LogCache } from "./chain-read.ts";
import { addChildren } from "./child-workload.ts";
import { cascadesIn, checkQuiesced } from "./child-invariants.ts";
import { ChildWatch } from "./child-watch.ts";
import { withFakeClock } from "./fake-clock.ts";
import { faultyStore, type Incarnation } from "./faulty-store.ts";
import { checkFences, FenceOwners, fleetMode, Members, type Member } from "./fleet.ts";
import {
  CANCEL_GRACE_MS,
  cancelledAt,
  checkChain,
  checkCancelledChain,
  checkChainEnd,
  checkFold,
  checkFork,
  checkLog,
  forkRefusable,
  generationId,
  markSuccessors,
  type ChainView,
  type ForkOrigin,
} from "./invariants.ts";
import { Prng } from "./prng.ts";
import { checkSpend, RealSpend } from "./spend.ts";
import { DEFAULT_FAULTS, type SimOptions, type SimResult } from "./sim-result.ts";
export type { SimOptions, SimResult } from "./sim-result.ts";
import {
  addLimiters,
  drawStartQueue,
  flowControlOf,
  flowCounts,
  isFlowCrash,
} from "./flow-control.ts";
import { checkLimiters, FlowTape } from "./limiter-invariants.ts";
import { checkQueues, ranUnadmitted } from "./queue-invariants.ts";
import { checkedRateLimits } from "../src/runtime/rate-limits.ts";
import { randomSends, randomSpec, simFlows, type Conversation, type Send } from "./workload.ts";

/** A chain that may rotate, read whole (readChain): what the checks learnt of it. */
interface ChainTrack {
  /** How many generations a read has seen (at least 1). */
  known: number;
  /** SIM8: the length of each generation's log when its successor was first seen. */
  frozenAt: Map<number, number>;
}

/** A conversation the operator talks to: its sends, and what the checks learnt of its chain. */
interface Conversing extends ChainTrack {
  conversation: Conversation;
  sends: { send: Send; state: "due" | "sending" | "sent"; via?: Incarnation }[];
  startedAt: number;
}

/** A fork the operator means to make of an execution (any generation of its chain). */
interface PlannedFork {
  id: string;
  atMs: number;
  state: "due" | "forking" | "done";
}

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
  const forkPrng = new Prng(seed ^ 0xf0c4);
  const childPrng = new Prng(seed ^ 0xc41d);
  const rates = { ...DEFAULT_FAULTS, ...options.faults };
  const violations: string[] = [];
  const mode = fleetMode(seed, options.fleet);
  const control = flowControlOf(seed, options.flowControl);
  const tape = new FlowTape(now);
  let flowCrashes = 0;
  /** Execution ids for debounced starts (which take none of their own): the same every run. */
  let debounced = 0;
  const newIds = {
    newId: () => {
      // Known from the start: a start whose process crashed before it answered still ran.
      const id = `sim-${seed}-db${debounced++}`;
      ids.push(id);
      return id;
    },
  };
  const oracle = mode.fleet ? memoryStore({ fleet: true }) : memoryStore();
  const fences = new FenceOwners();
  const conversations = new Map<string, Conversing>();
  const cache: LogCache = new Map();
  /** Executions that had ended when last checked, with the length of their log then. */
  const settled = new Map<string, number>();
  const running = new Map<string, number>();
  const spend = new RealSpend();
  const pending: Promise<unknown>[] = [];
  let crashes = 0;
  let decisions = 0;
  /** Forks made, by id: what they were forked from (SIM11), and the last log length checked. */
  const forks = new Map<string, ForkOrigin & { checked?: number }>();
  const planned: PlannedFork[] = [];
  let forkNames = 0;
  const watch = new ChildWatch(oracle, cache, violations);
  const children = watch.chains;
  /** The shape of each chain's last read that was checked (every log's length, the inbox's). */
  const shapes = new Map<string, string>();
  /** The canonical fold of each log as last checked, by its length (SIM3). */
  const folds = new Map<string, { length: number; text: string }>();
  /** The last read of each chain read whole (a conversation's, a child's). */
  const lastViews = new Map<string, ChainView>();

  const { flow, child } = simFlows({
    async begin(executionId, stepId, tokens) {
      spend.spend(executionId, tokens);
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
      if (ranUnadmitted(log)) {
        violations.push(`SIM17 ${executionId}: step ${stepId} started before its admission`);
      }
    },
    invoke: (call) => tape.begin(call),
    end(executionId) {
      running.set(executionId, (running.get(executionId) ?? 1) - 1);
    },
    decision: () => ++decisions,
  });

  const clock = { now };
  // Snapshots every few events, so that loading through them is checked too (SIM3).
  const snapshotEvery = prng.int(1, 8);
  let boots = 0;
  const boot = (): Member => {
    const me = boots++;
    const held: { runtime?: Runtime; incarnation?: Incarnation } = {};
    const incarnation = faultyStore(
      oracle.reopen(),
      faultPrng,
      rates,
      () => {
        crashes++;
        if (isFlowCrash(held.incarnation?.crashedIn, tape)) flowCrashes++;
        // The process is gone: its runtime stops at once (close stops every run synchronously).
        void held.runtime?.close();
      },
      undefined,
      // After every event the log gains.
      (batches, outcomes) => {
        fences.record(`process-${me}`, batches, outcomes, violations);
        return check();
      },
      tape,
    );
    held.incarnation = incarnation;
    const runtime = createRuntime({
      store: incarnation.store,
      clock,
      ownerId: `process-${me}`,
      leaseTtlMs: 1000,
      pollIntervalMs: 50,
      noticePollMs: 20,
      snapshotEvery,
      closeStore: false,
      features: { continueAsNew: true },
      onError: () => undefined,
      queues: control.queues,
      rateLimits: control.rateLimits,
      ids: newIds,
    });
    runtime.registerFlow(flow).registerFlow(child);
    held.runtime = runtime;
    return { incarnation, runtime };
  };
  const members = new Members(mode, boot);
  // An operator's process on the same store, without faults: resumes and cancels from outside.
  const admin = createRuntime({
    store: oracle.reopen(),
    clock,
    background: false,
    closeStore: false,
    features: { continueAsNew: true },
    ownerId: "operator",
    onError: () => undefined,
    queues: control.queues,
    rateLimits: control.rateLimits,
  });
  const spawn = (p: Promise<unknown>) => pending.push(p.catch(() => undefined));
  /** Every execution (chain) of the seed: those the operator started, then forks as made. */
  const ids: string[] = [];
  let started = 0;
  const start = () => {
    const id = `sim-${seed}-${started++}`;
    const spec = randomSpec(prng);
    addChildren(spec, childPrng);
    addLimiters(control, spec);
    const { debounce, ...queue } = drawStartQueue(control, spec) ?? {};
    const opts: StartOptions = { ...queue };
    if (spec.budgetTokens !== undefined) opts.budget = { tokens: spec.budgetTokens };
    if (spec.deadlineMs !== undefined) opts.deadlineMs = spec.deadlineMs;
    if (spec.chain) converse(id, spec.chain, prng);
    const fork = forkPrng.chance(0.2);
    const atMs = now() + (fork ? forkPrng.int(0, 3000) : 0);
    if (debounce) {
      // Its id is the runtime's (newIds: in `ids` from then on), or that of the execution it
      // joined (DB2), which its own start put there.
      opts.debounce = debounce;
      spawn(members.any().runtime.start(flow, spec, opts));
      return;
    }
    ids.push(id);
    spawn(members.any().runtime.start(flow, spec, { ...opts, id }));
    if (fork) planned.push({ id, atMs, state: "due" });
  };

  /** A conversation's sends, drawn now, from `startedAt` on. */
  const converse = (id: string, conversation: Conversation, draw: Prng) => {
    const sends = randomSends(draw, conversation).map((send) => ({ send, state: "due" as const }));
    conversations.set(id, { conversation, sends, startedAt: now(), known: 1, frozenAt: new Map() });
  };

  /**
   * Forks what is due: a drawn generation of the execution, at a drawn sequence number of its
   * log as read now, a little later (so the log may have moved, or ended, by then).
   */
  const forkDue = async () => {
    for (const plan of planned) {
      if (plan.state !== "due" || now() < plan.atMs) continue;
      const view = await viewOf(plan.id);
      if (view.logs.length === 0) continue; // not started yet (its start was lost in a crash)
      plan.state = "forking";
      const n = forkPrng.int(0, view.logs.length - 1);
      const origin = generationId(plan.id, n);
      const log = view.logs[n] ?? [];
      const at = forkPrng.int(0, Math.max(0, log.length - 1));
      const forkId = `${plan.id}-fork${forkNames++}`;
      const delay = forkPrng.int(0, 200);
      const made = (async () => {
        await new Promise((resolve) => setTimeout(resolve, delay));
        try {
          await admin.fork(origin, at, forkId);
        } catch (e) {
          const code = (e as { code?: unknown }).code;
          const log = await oracle.read(origin);
          if (!forkRefusable(log, at, typeof code === "string" ? code : "")) {
            violations.push(
              `SIM11 ${forkId}: the fork of ${origin} at ${at} was refused (${String(code)}: ${(e as Error).message}), its log has ${log.length} events, ${log[log.length - 1]?.kind} last`,
            );
          }
          return;
        }
        forks.set(forkId, { origin, at });
        const talk = conversations.get(plan.id);
        if (talk) converse(forkId, talk.conversation, forkPrng);
        ids.push(forkId);
      })().finally(() => (plan.state = "done"));
      spawn(made);
    }
  };

  /** The execution's id, or now and then, for a chain, a later generation's (routed to its head). */
  const address = (id: string): string => {
    const known = conversations.get(id)?.known ?? 1;
    return known > 1 && prng.chance(0.3) ? generationId(id, prng.int(1, known - 1)) : id;
  };

  /** Sends the conversations' messages that are due (all of them when `all`). */
  const sendDue = (all: boolean) => {
    for (const id of ids) {
      const talk = conversations.get(id);
      for (const s of talk?.sends ?? []) {
        // A send cut short by its process's crash is the sender's to retry.
        if (s.state === "sending" && s.via?.dead) s.state = "due";
        if (!talk || s.state !== "due" || (!all && now() < talk.startedAt + s.send.atMs)) continue;
        const to = s.send.toLater ? address(id) : id;
        const proc = members.any();
        const owner = prng.chance(0.3) && !proc.incarnation.dead;
        const from = owner ? proc.runtime : admin;
        s.state = "sending";
        s.via = owner ? proc.incarnation : undefined;
        spawn(
          from.send(to, s.send.n, { key: s.send.key }).then(
            () => (s.state = "sent"),
            (e: unknown) => {
              // A chain that has ended takes no message; anything else is retried.
              s.state = isLoomError(e, "LOOM_NOT_RESUMABLE") ? "sent" : "due";
            },
          ),
        );
      }
    }
  };

  /** A chain's generations (one, for a flow that is no conversation) as one read sees them. */
  const viewOf = async (id: string, fresh = false): Promise<ChainView> => {
    const track = conversations.get(id) ?? children.get(id);
    if (track) {
      const last = lastViews.get(id);
      if (!fresh && last && (await unmoved(last))) return last;
      const view = await readChain(oracle, id, track.known, cache, !children.has(id));
      lastViews.set(id, view);
      return view;
    }
    const cached = cache.get(id);
    const log = cached?.length === (await oracle.head(id)) + 1 ? cached : await oracle.read(id);
    cache.set(id, log);
    return { chainId: id, logs: log.length > 0 ? [log] : [], messages: [] };
  };

  /**
   * Whether nothing of a chain's last read moved: every head where it was, no next generation,
   * the same inbox. Then the last read is still one instant's (the earliest of these reads': a log
   * only grows), so a check after each event need not take the whole read again.
   */
  const unmoved = async (view: ChainView): Promise<boolean> => {
    if (view.beyond !== undefined) return false;
    for (let n = 0; n <= view.logs.length; n++) {
      const head = await oracle.head(generationId(view.chainId, n));
      if (head !== (view.logs[n]?.length ?? 0) - 1) return false;
    }
    if (!conversations.has(view.chainId)) return true;
    const inbox = await oracle.readMessages(
      view.chainId,
      DEFAULT_TOPIC,
      -1,
      Number.MAX_SAFE_INTEGER,
    );
    return inbox.length === view.messages.length;
  };

  /** Every chain of the seed: those the operator started, forks, then children as listed. */
  const chainIds = () => [...ids, ...children.keys()];

  /**
   * Checks every execution and chain; `all` also those that have not moved since they were last
   * checked (an execution that ended, a chain whose logs and inbox did not grow), which the
   * checks after each event skip.
   */
  async function check(all = false): Promise<void> {
    await watch.discover();
    for (const id of chainIds()) {
      const view = await viewOf(id, all);
      for (const [n, log] of view.logs.entries()) {
        await checkExecution(generationId(id, n), log, all);
      }
      const fork = forks.get(id);
      const log = view.logs[0] ?? [];
      if (fork && (all || fork.checked !== log.length)) {
        fork.checked = log.length;
        checkFork(id, log, fork, await oracle.read(fork.origin, 0, fork.at + 1), violations);
      }
      if (view.logs.length === 0) continue;
      const track = conversations.get(id) ?? children.get(id);
      if (track) {
        track.known = Math.max(track.known, view.logs.length);
        markSuccessors(view, track.frozenAt);
      }
      const shape = `${view.logs.map((log) => log.length).join(",")}/${view.messages.length}`;
      if (!all && shape === shapes.get(id)) continue;
      shapes.set(id, shape);
      if (track) checkChain(view, track.frozenAt, violations);
      await watch.check(view);
    }
  }

  async function checkExecution(id: string, log: readonly Envelope[], all: boolean) {
    const last = log[log.length - 1];
    if (all || settled.get(id) !== log.length) {
      if (last && isTerminalEvent(last)) settled.set(id, log.length);
      // An unchanged log is checked again (its snapshot, the live state may move), its fold not.
      const memo = folds.get(id);
      if (memo?.length !== log.length) {
        checkLog(id, log, violations);
        checkFences(id, log, violations);
      }
      const folded = memo?.length === log.length ? memo.text : canonicalJson(foldAll(log));
      folds.set(id, { length: log.length, text: folded });
      const loaded = await loadState(oracle, id);
      const [held, ...others] = members.held(id);
      checkFold(id, log, loaded, held, violations, folded);
      for (const more of others) checkFold(id, log, undefined, more, violations, folded);
    }
    const at = cancelledAt(log);
    if (at !== undefined && now() - at > CANCEL_GRACE_MS && (running.get(id) ?? 0) > 0) {
      violations.push(
        `SIM5 ${id}: ${running.get(id)} effects still running ${now() - at} ms after the cancel`,
      );
    }
  }

  /** The supervisor's wake rows (W1, W2) due now. */
  const wakeRows = async () =>
    (await oracle.dueTimers(now(), 10_000)).filter((t) => isWake(t.timerId));

  for (let i = prng.int(1, 3); i > 0; i--) start();
  const steps = options.steps ?? 60;
  for (let step = 0; step < steps && violations.length === 0; step++) {
    const r = prng.next();
    if (r < 0.1 && started < 6) start();
    else if (r < 0.25) {
      // From the operator's process, or from the owner's own (its cached, parked run).
      const from = prng.chance(0.5) ? admin : members.any().runtime;
      spawn(from.resume(address(prng.pick(ids)), prng.int(1, 9)));
    } else if (r < 0.29) {
      const from = prng.chance(0.5) ? admin : members.any().runtime;
      spawn(from.cancel(address(prng.pick(ids)), "simulated operator"));
    }
    watch.operate(childPrng, [admin, members.any().runtime], spawn);
    sendDue(false);
    await forkDue();
    await tick(prng.int(0, 250));
    // A seed with one process draws its downtime as it always did; a fleet's others, their own.
    await members.revive((i) => tick((i === 0 ? prng : mode.draw).int(0, 1200)));
    await check();
  }
  // Drain: the world stops failing; answer every suspend and let time pass until all ends.
  rates.crash = 0;
  rates.transient = 0;
  rates.dropAfterAck = 0;
  for (let round = 0; round < 200 && violations.length === 0; round++) {
    await members.revive();
    sendDue(true);
    let open = 0;
    for (const id of chainIds()) {
      for (const [n] of (await viewOf(id)).logs.entries()) {
        const gid = generationId(id, n);
        const state = await loadState(oracle, gid);
        if (!state || isTerminalStatus(state.status)) continue;
        open++;
        if (state._openSuspends.length > 0 && !(await watch.mustCascade(state))) {
          spawn(admin.resume(gid, 1));
        }
      }
    }
    // A fork the steps began may still be on its way: it is driven to its end too; so is a child
    // written after the last look (before its parent ended); and the supervisor's wake rows are
    // acted on (SIM14).
    const known = children.size;
    await watch.discover();
    const waking = (await wakeRows()).length > 0;
    const quiet = open === 0 && known === children.size && !waking;
    if (quiet && planned.every((p) => p.state !== "forking")) break;
    await tick(500);
    await check();
  }
  await check(true);
  const failedBefore = violations.length;
  let events = 0;
  let rotations = 0;
  let childRotations = 0;
  let messages = 0;
  const ended: Record<string, number> = {};
  const views = new Map<string, ChainView>();
  const logs = new Map<string, readonly Envelope[]>();
  for (const id of chainIds()) {
    const view = await viewOf(id);
    views.set(id, view);
    rotations += Math.max(0, view.logs.length - 1);
    if (children.has(id)) childRotations += Math.max(0, view.logs.length - 1);
    messages += view.messages.length;
    for (const [n, log] of view.logs.entries()) {
      const gid = generationId(id, n);
      logs.set(gid, log);
      const state = await loadState(oracle, gid);
      if (state) ended[state.status] = (ended[state.status] ?? 0) + 1;
      events += log.length;
      if (!state) continue;
      // Liveness is judged only in a run that broke nothing else (a violation stops the drain).
      if (failedBefore === 0 && !isTerminalStatus(state.status)) {
        violations.push(`SIM7 ${gid}: still ${state.status} after the drain`);
      }
    }
    const talk = conversations.get(id);
    if (talk && failedBefore === 0) checkChainEnd(view, talk.conversation, violations);
    if (children.has(id) && failedBefore === 0) checkCancelledChain(view, violations);
  }
  if (failedBefore === 0) checkQuiesced(logs, await wakeRows(), violations);
  checkSpend(logs, spend, violations);
  checkQueues(logs, control.queues, now(), violations);
  checkLimiters(tape.attempts, checkedRateLimits(control.rateLimits), now(), violations);
  // Closing waits on the simulated clock too (a journal flush, a lease wait): keep it moving.
  const settle = async (work: Promise<unknown>) => {
    let done = false;
    void work.finally(() => (done = true));
    for (let i = 0; i < 10_000 && !done; i++) await tick(10);
    if (!done) violations.push("SIM7 the runtime did not close within 100 simulated seconds");
  };
  for (const m of members.all) await settle(m.runtime.close());
  await settle(admin.close());
  await settle(Promise.all(pending));
  const all: Record<string, Envelope[]> = {};
  for (const id of chainIds()) {
    const view = await viewOf(id);
    if (view.logs.length === 0) all[id] = [];
    for (const [n, log] of view.logs.entries()) all[generationId(id, n)] = [...log];
  }
  const hashed = { logs: all, inboxes: [...views.values()].map((v) => v.messages) };
  const logHash = createHash("sha256").update(canonicalJson(hashed)).digest("hex").slice(0, 16);
  return {
    seed,
    violations: [...new Set(violations)],
    events,
    crashes,
    executions: started,
    rotations,
    messages,
    forks: forks.size,
    children: children.size,
    childRotations,
    cascades: cascadesIn(logs),
    fleet: mode.fleet,
    members: mode.size,
    claims: members.claims,
    flowControl: control.enabled,
    ...flowCounts(logs, tape, flowCrashes),
    logHash,
    ended,
    ...(violations.length > 0 ? { logs: all } : {}),
  };
}
