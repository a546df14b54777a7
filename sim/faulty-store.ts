/**
 * A fault-injecting store for the simulator, one per simulated process incarnation. Around every
 * call it may, as the seed decides:
 *
 * - crash the process before the call (nothing happens) or, for a call that writes, after it
 *   committed (it happened, the caller never learns): the incarnation is dead from then on, every
 *   later call of it fails, and `onCrash` stops its runtime at once;
 * - fail the call transiently before it (nothing happens) or, for a call that writes, lose its
 *   reply after it committed (it happened, the caller gets an error);
 * - delay it, or its reply, on the simulated clock, which reorders concurrent calls: each call is
 *   still atomic, which is all the store contract promises.
 *
 * A fleet's store (`FleetStore`: the inner store has `claimRunnable` and `listen`, and only then)
 * is one too: a claim is a call that writes, with the faults of any other (a crash before it or
 * after it took its leases, a transient failure, a lost reply: its leases then expire unused), and
 * a subscription hears the inner store's wakes, each dropped at the rate `dropWake` (wakes are
 * best effort, S18) and all of them once the process is dead, whose subscriptions end with it.
 *
 * `onCommit` runs after every append that committed, with what it committed, so the invariants
 * are checked after every event the log gains.
 *
 * Queues and limiters (issue 26) are calls like any other: an admission and a reservation write
 * (a crash after an admission committed leaves its leases to expire, QU3; one after a grant
 * leaves a reservation nobody settles), and `tape` hears each reservation and settlement that
 * committed (SIM18). `queueNames`, which the admission duty asks at every poll, passes through
 * without faults, so that a seed without queues draws its faults where it drew them before.
 *
 * `dropAfterAck` is a deliberately broken store for the simulator's own test: it acknowledges an
 * append without writing it. So are `ignoreKeyConcurrency` (admission is not told the queue's
 * per-key limit) and `ignoreWindow` (a reservation is counted in a window of 1 ms): each is the
 * chance that a call is so broken.
 */
import {
  isFleetStore,
  type AppendBatch,
  type AppendOutcome,
  type FleetStore,
  type LimiterAnswer,
  type LimiterAsk,
  type LimiterStore,
  type QueueStore,
  type Store,
} from "../src/store/spi.ts";
import type { Prng } from "./prng.ts";

export interface FaultRates {
  crash: number;
  transient: number;
  delay: number;
  maxDelayMs: number;
  /** Mutation: acknowledge an append without writing it. */
  dropAfterAck: number;
  /** A fleet store's wake that never arrives (best effort, S18). */
  dropWake: number;
  /** Mutation: an admission that ignores the queue's keyConcurrency. */
  ignoreKeyConcurrency: number;
  /** Mutation: a reservation counted in a window of 1 ms instead of the limiter's. */
  ignoreWindow: number;
}

/** What the queue and limiter calls committed (sim/limiter-invariants.ts FlowTape). */
export interface FlowObserver {
  admitted(leases: number): void;
  reserved(limiter: string, ask: LimiterAsk, nowMs: number, answer: LimiterAnswer): void;
  settled(limiter: string, id: string): void;
}

export class SimCrash extends Error {
  override readonly name = "SimCrash";
}

export interface Incarnation {
  store: Store;
  dead: boolean;
  /** The appends (appendMany calls) this incarnation made. */
  appends: number;
  /** The executions its claims took whose leases it learnt of (a fleet store's: S17). */
  claimed: number;
  /** Where it crashed ("before reserve", "after admitQueued committed"), once it did. */
  crashedIn?: string;
  /** Kills the process now, as a crash does. */
  kill(): void;
}

/** A crash at a chosen append instead of a random one: the `append`-th, before or after it. */
export interface CrashPoint {
  append: number;
  after: boolean;
}

export function faultyStore(
  inner: Store,
  prng: Prng,
  rates: FaultRates,
  onCrash: () => void,
  crashAt?: CrashPoint,
  onCommit?: (batches: readonly AppendBatch[], outcomes: readonly AppendOutcome[]) => Promise<void>,
  tape?: FlowObserver,
): Incarnation {
  /** The inner store's subscriptions of this incarnation, which end when it dies. */
  const listening = new Set<() => Promise<void>>();
  const self: Incarnation = {
    store: inner,
    dead: false,
    appends: 0,
    claimed: 0,
    kill() {
      if (self.dead) return;
      self.dead = true;
      for (const stop of listening) void stop();
      listening.clear();
      onCrash();
    },
  };
  const crash = (when: string): never => {
    self.crashedIn = when;
    self.kill();
    throw new SimCrash(`simulated crash ${when}`);
  };
  const dead = () => new SimCrash("the process is dead");
  const pause = async () => {
    await new Promise((r) => setTimeout(r, prng.int(0, rates.maxDelayMs)));
    if (self.dead) throw dead();
  };
  const guard = async <T>(name: string, call: () => Promise<T>, writes = false): Promise<T> => {
    if (self.dead) throw dead();
    if (prng.chance(rates.delay)) await pause();
    if (prng.chance(rates.crash)) crash(`before ${name}`);
    if (prng.chance(rates.transient)) {
      throw new Error(`simulated transient failure of ${name}`);
    }
    const result = await call();
    if (!writes) return result;
    if (prng.chance(rates.delay)) await pause();
    if (prng.chance(rates.crash)) crash(`after ${name} committed`);
    if (prng.chance(rates.transient)) {
      throw new Error(`simulated lost reply of ${name} (it committed)`);
    }
    return result;
  };
  const store: Store = {
    kind: `faulty-${inner.kind}`,
    appendMany: (batches) =>
      guard(
        "appendMany",
        async () => {
          const n = self.appends++;
          if (crashAt?.append === n && !crashAt.after) crash(`before append ${n}`);
          if (prng.chance(rates.dropAfterAck)) return batches.map(() => ({ ok: true as const }));
          const outcomes = await inner.appendMany(batches);
          if (outcomes.some((o) => o.ok)) await onCommit?.(batches, outcomes);
          if (crashAt?.append === n && crashAt.after) crash(`after append ${n} committed`);
          return outcomes;
        },
        true,
      ),
    read: (id, from, limit) => guard("read", () => inner.read(id, from, limit)),
    head: (id) => guard("head", () => inner.head(id)),
    list: (q) => guard("list", () => inner.list(q)),
    saveSnapshot: (id, s) => {
      const copy = structuredClone(s);
      return guard("saveSnapshot", () => inner.saveSnapshot(id, copy));
    },
    loadSnapshot: (id) => guard("loadSnapshot", () => inner.loadSnapshot(id)),
    acquireLease: (id, o, opts) =>
      guard("acquireLease", () => inner.acquireLease(id, o, opts), true),
    renewLease: (id, o, f, opts) =>
      guard("renewLease", () => inner.renewLease(id, o, f, opts), true),
    releaseLease: (id, o, f) => guard("releaseLease", () => inner.releaseLease(id, o, f), true),
    getLease: (id) => guard("getLease", () => inner.getLease(id)),
    dueTimers: (now, limit) => guard("dueTimers", () => inner.dueTimers(now, limit)),
    nextWakeAt: () => guard("nextWakeAt", () => inner.nextWakeAt()),
    deleteTimer: (id, t) => guard("deleteTimer", () => inner.deleteTimer(id, t), true),
    deferTimer: (id, t, at) => guard("deferTimer", () => inner.deferTimer(id, t, at), true),
    takeNotices: (o) => guard("takeNotices", () => inner.takeNotices(o), true),
    putSchedule: (s) => guard("putSchedule", () => inner.putSchedule(s)),
    listSchedules: () => guard("listSchedules", () => inner.listSchedules()),
    advanceSchedule: (n, at) => guard("advanceSchedule", () => inner.advanceSchedule(n, at)),
    deleteSchedule: (n) => guard("deleteSchedule", () => inner.deleteSchedule(n)),
    setSchedulePaused: (n, p, at) =>
      guard("setSchedulePaused", () => inner.setSchedulePaused(n, p, at), true),
    forksOf: (id, limit) => guard("forksOf", () => inner.forksOf(id, limit)),
    // Member rows are no part of what the simulation checks: passed through, so the faults a
    // seed draws fall where they fell before the background loop wrote heartbeats.
    heartbeat: (m) => inner.heartbeat(m),
    members: (since) => inner.members(since),
    leaveFleet: (o) => inner.leaveFleet(o),
    leasesOf: (o, now, limit) => inner.leasesOf(o, now, limit),
    appendMessage: (c, m) => guard("appendMessage", () => inner.appendMessage(c, m), true),
    readMessages: (c, t, after, limit) =>
      guard("readMessages", () => inner.readMessages(c, t, after, limit)),
    deleteExecution: (id) => guard("deleteExecution", () => inner.deleteExecution(id), true),
    compact: (id, through, keep) => guard("compact", () => inner.compact(id, through, keep), true),
    putKey: (id, material) => guard("putKey", () => inner.putKey(id, material), true),
    getKey: (id) => guard("getKey", () => inner.getKey(id)),
    listKeys: (prefix) => guard("listKeys", () => inner.listKeys(prefix)),
    destroyKey: (id) => guard("destroyKey", () => inner.destroyKey(id), true),
    ...flowControlCalls(inner, guard, prng, rates, tape),
    close: async () => undefined,
  };
  /** A fleet store's claims and wakes, with their faults. */
  const fleetCalls = (fleet: FleetStore): FleetStore => ({
    claimRunnable: async (owner, opts) => {
      const leases = await guard("claimRunnable", () => fleet.claimRunnable(owner, opts), true);
      self.claimed += leases.length;
      return leases;
    },
    listen: async (onWake) => {
      const stop = await guard("listen", () =>
        fleet.listen((wake) => {
          if (!self.dead && !prng.chance(rates.dropWake)) onWake(wake);
        }),
      );
      // Subscribed as the process died: the subscription dies with it.
      if (self.dead) {
        await stop();
        throw dead();
      }
      listening.add(stop);
      return async () => {
        listening.delete(stop);
        await stop();
      };
    },
  });
  self.store = isFleetStore(inner) ? { ...store, ...fleetCalls(inner) } : store;
  return self;
}

type Guard = <T>(name: string, call: () => Promise<T>, writes?: boolean) => Promise<T>;

/** The queue and limiter calls (issue 26), with their faults and mutations. */
function flowControlCalls(
  inner: Store,
  guard: Guard,
  prng: Prng,
  rates: FaultRates,
  tape: FlowObserver | undefined,
): Pick<Store, keyof QueueStore | keyof LimiterStore> {
  return {
    admitQueued: (owner, opts) => {
      const broken = rates.ignoreKeyConcurrency > 0 && prng.chance(rates.ignoreKeyConcurrency);
      const limits = { ...opts.limits };
      if (broken) delete limits.keyConcurrency;
      return guard(
        "admitQueued",
        async () => {
          const leases = await inner.admitQueued(owner, { ...opts, limits });
          tape?.admitted(leases.length);
          return leases;
        },
        true,
      );
    },
    queueView: (q, opts) => guard("queueView", () => inner.queueView(q, opts)),
    queueNames: () => inner.queueNames(),
    reserve: (limiter, limit, ask, nowMs) => {
      const broken = rates.ignoreWindow > 0 && prng.chance(rates.ignoreWindow);
      const counted = broken ? { ...limit, windowMs: 1 } : limit;
      return guard(
        "reserve",
        async () => {
          const answer = await inner.reserve(limiter, counted, ask, nowMs);
          tape?.reserved(limiter, ask, nowMs, answer);
          return answer;
        },
        true,
      );
    },
    settle: (limiter, id, used, nowMs) =>
      guard(
        "settle",
        async () => {
          await inner.settle(limiter, id, used, nowMs);
          tape?.settled(limiter, id);
        },
        true,
      ),
    withdraw: (limiter, id) => guard("withdraw", () => inner.withdraw(limiter, id), true),
    blockLimiter: (limiter, untilMs) =>
      guard("blockLimiter", () => inner.blockLimiter(limiter, untilMs), true),
    limiterView: (limiter, nowMs) => guard("limiterView", () => inner.limiterView(limiter, nowMs)),
    limiterNames: () => guard("limiterNames", () => inner.limiterNames()),
  };
}
