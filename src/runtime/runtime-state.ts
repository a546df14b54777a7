/**
 * The runtime's one owner object (issue 24): everything a runtime holds, declared here and only
 * here, what it is made of (its store sealed by the codec and audit, its leases, timers, cache,
 * background loop and fleet membership), the callbacks its runs make (RunHost), and its close.
 *
 * What acts on it lives in the rooms above, as functions that take it: runtime-routing.ts (from
 * an addressed id to the generation that acts: routing, cancel), runtime-core.ts (authorize,
 * create, deliver, drive), runtime-wiring.ts (what runs and the supervisor act through), and the
 * public verbs, grouped by what they act on: verbs-executions.ts, verbs-chains.ts,
 * verbs-fleet.ts and verbs-trust.ts. runtime.ts is the face: the Runtime class, whose methods
 * hand this object to them.
 *
 * Invariants (runtime.ts states them): W7 (the state is declared here once: the modules that act
 * on it keep none of their own), W8 (this module imports no room above it: what it calls upward,
 * the deps a run's context acts through, a fired timer and the background duties, is handed in
 * as a RuntimeWiring by runtime.ts).
 */
import { sealStore } from "../trust/sealed-store.ts";
import {
  CancelledError,
  FencedError,
  InvalidInputError,
  NonDeterminismError,
  RuntimeClosedError,
} from "../kernel/errors.ts";
import { boundedJson, type Json } from "../kernel/json.ts";
import { DEFAULT_LIMITS, type Limits } from "../kernel/limits.ts";
import { checkedPrices, type PriceTable } from "../kernel/prices.ts";
import type { Clock, IdSource } from "../kernel/clock.ts";
import { isFleetStore, type InboxMessage, type QueueLimits, type Store } from "../store/spi.ts";
import type { ContextDeps } from "./context.ts";
import { defaultMiddleware, effectChain, type MiddlewareContext } from "../effects/middleware.ts";
import { DeltaBus } from "../effects/deltas.ts";
import type { Flow } from "./flow.ts";
import { Journal } from "./journal.ts";
import { newOwnerId } from "./owner.ts";
import { Leases } from "./leases.ts";
import { Tasks, positive } from "./runtime-support.ts";
import { READ_BATCH } from "./inbox.ts";
import type { RuntimeOptions } from "./runtime-options.ts";
import type { Run, RunHost } from "./run.ts";
import { outcomeOf, type Outcome } from "./outcome.ts";
import { ParkedCache } from "./parked-cache.ts";
import { TimerService } from "./timer-service.ts";
import { randomIds, systemClock } from "./system.ts";
import { FleetMember } from "./fleet.ts";
import { Tracing } from "./tracing.ts";
import { BackgroundLoop } from "./background-loop.ts";
import type { NegotiationPolicy } from "./runtime-options.ts";
import { checkedNegotiation } from "./syscalls-budgets.ts";
import { checkedQueueLimits } from "./queue-options.ts";
import { checkedRateLimits, rateLimiting } from "./rate-limits.ts";

const RECENT_OUTCOMES = 1000;
/** The longest close() waits for background duties in flight. */
const CLOSE_WAIT_MS = 5000;

/** What the state calls in the rooms above it (W8), handed in by runtime.ts. */
export interface RuntimeWiring {
  /** What every run's context acts through (runtime-wiring.ts), made once per runtime. */
  contextDeps(s: RuntimeState): ContextDeps;
  /** A local timer came due (verbs-fleet.ts). */
  fireTimer(s: RuntimeState, id: string, callId: string): Promise<void>;
  /** The background loop's duties, in order: due timers, schedules, recovery (verbs-fleet.ts). */
  duties: readonly ((s: RuntimeState) => Promise<unknown>)[];
}

export class RuntimeState implements RunHost {
  readonly store: Store;
  readonly clock: Clock;
  readonly journal: Journal;
  readonly leaseTtlMs: number;
  readonly ownerId: string;
  readonly limits: Limits;
  readonly ids: IdSource;
  readonly snapshotEvery: number;
  readonly tracing: Tracing;
  readonly maxActive: number;
  readonly maxCarryBytes: number;
  /** The outside ceilings of ctx.negotiateBudget (RuntimeOptions.negotiation). */
  readonly negotiation: NegotiationPolicy;
  /** Each queue's limits (RuntimeOptions.queues, queues.ts QU4), checked and frozen. */
  readonly queues: Readonly<Record<string, QueueLimits>>;
  /** Prices by model name (RuntimeOptions.prices), checked and frozen. */
  readonly prices: PriceTable;
  /** This runtime's live deltas (effects/deltas.ts D1): never another runtime's. */
  readonly deltas = new DeltaBus();
  readonly maxChainHops: number;
  /** `features.continueAsNew`: chains exist, so addressing routes to a chain's head. */
  readonly chains: boolean;
  readonly pollIntervalMs: number;
  /** How often a member's heartbeat is written (members.ts M1). */
  readonly heartbeatMs: number;
  /** This runtime as a fleet member (members.ts M1, M2): when it started, its last heartbeat. */
  readonly membership: { startedAtMs: number; lastBeatMs?: number; flows?: string };
  readonly flows = new Map<string, Flow>();
  readonly runs = new Map<string, Run>();
  readonly stuck = new Map<string, Error>();
  /** Outcomes of executions that ended here recently: a fact in the log, kept to skip a read. */
  readonly outcomes = new Map<string, Outcome>();
  /** Addressed id -> the head routing last found (a verified member of the same chain). */
  readonly knownHeads = new Map<string, string>();
  /** What routing reads with, made once: `chainDeps()` makes five closures, and every resume routes. */
  readonly routing: { store: Store; maxChainHops: number };
  readonly tasks = new Tasks((e) => this.report(e));
  readonly cache: ParkedCache;
  readonly chain: (ctx: MiddlewareContext) => Promise<unknown>;
  readonly leases: Leases;
  readonly timers: TimerService;
  /** What every run's context acts through (runtime-wiring.ts): closures over this state. */
  readonly contextDeps: ContextDeps;
  /** Due timers, schedules and recovery, when the background loop runs (background-loop.ts). */
  readonly loop: BackgroundLoop | undefined;
  /** A fleet member's claims and wakes, when the store is shared by a fleet (fleet.ts). */
  readonly fleet: FleetMember | undefined;
  noticeLoop: NodeJS.Timeout | undefined;
  takingNotices = false;
  /** Runs this runtime stopped because another owner took their lease over (fleet L2). */
  fencedRuns = 0;
  closed = false;

  constructor(
    readonly options: RuntimeOptions,
    wiring: RuntimeWiring,
  ) {
    this.clock = options.clock ?? systemClock;
    this.store = sealStore(options.store, {
      codec: options.codec,
      audit: options.audit,
      clock: this.clock,
      onProblem: (e) => this.report(e),
    });
    this.ids = options.ids ?? randomIds;
    this.ownerId = options.ownerId ?? newOwnerId();
    this.leaseTtlMs = positive(options.leaseTtlMs, 30_000, "leaseTtlMs");
    this.snapshotEvery = positive(options.snapshotEvery, 1000, "snapshotEvery");
    this.pollIntervalMs = positive(options.pollIntervalMs, 500, "pollIntervalMs");
    this.heartbeatMs = positive(options.heartbeatMs, 10_000, "heartbeatMs");
    this.membership = { startedAtMs: this.clock.now() };
    this.maxActive = positive(options.maxActive, Infinity, "maxActive");
    this.maxCarryBytes = positive(options.maxCarryBytes, 1024 * 1024, "maxCarryBytes");
    this.negotiation = checkedNegotiation(options.negotiation);
    this.queues = checkedQueueLimits(options.queues);
    this.prices = checkedPrices(options.prices);
    this.maxChainHops = positive(options.maxChainHops, 8, "maxChainHops");
    this.chains = options.features?.continueAsNew === true;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.routing = { store: this.store, maxChainHops: this.maxChainHops };
    this.journal = new Journal(this.store);
    this.tracing = new Tracing(options.tracerProvider, options.codec !== undefined);
    this.chain = this.effectChainOf(options);
    this.leases = new Leases(this.store, this.ownerId, this.clock, this.leaseTtlMs, () =>
      this.assertOpen(),
    );
    this.cache = new ParkedCache(
      options.cache?.maxExecutions ?? 1000,
      options.cache?.maxBytes ?? 256 * 1024 * 1024,
      (run) => run.stop(new RuntimeClosedError(`execution "${run.id}" was evicted from the cache`)),
    );
    this.timers = new TimerService(this.clock, (id, callId) => wiring.fireTimer(this, id, callId));
    this.contextDeps = wiring.contextDeps(this);
    this.fleet = isFleetStore(this.store)
      ? new FleetMember({
          store: this.store,
          ownerId: this.ownerId,
          leaseTtlMs: this.leaseTtlMs,
          now: () => this.clock.now(),
          tick: (afterMs) => this.loop?.within(afterMs),
          takeNotices: () => void this.takeNotices(),
          report: (e) => this.report(e),
        })
      : undefined;
    this.loop =
      options.background === false
        ? undefined
        : new BackgroundLoop(
            this.pollIntervalMs,
            wiring.duties.map((duty) => () => duty(this)),
            (e) => this.report(e),
          );
    if (this.loop) {
      this.fleet?.listen();
      this.loop.nudge();
      const every = positive(options.noticePollMs, 50, "noticePollMs");
      this.noticeLoop = setInterval(() => void this.takeNotices(), every);
      this.noticeLoop.unref();
    }
  }

  /** The effect chain: the options' middleware, then admission, then (RL1) the rate limits innermost. */
  private effectChainOf(options: RuntimeOptions): (ctx: MiddlewareContext) => Promise<unknown> {
    if (options.unpricedCost !== undefined && !["refuse", "allow"].includes(options.unpricedCost)) {
      throw new InvalidInputError('unpricedCost must be "refuse" or "allow"');
    }
    const admission = options.unpricedCost ? { unpricedCost: options.unpricedCost } : {};
    // RL1: the rate limits are innermost, whatever chain the options give.
    const limiting = rateLimiting(checkedRateLimits(options.rateLimits), {
      store: this.store,
      now: () => this.clock.now(),
      report: (e) => this.report(e),
      stop: (id, e) => this.runs.get(id)?.stop(e),
    });
    return effectChain(options.middleware ?? defaultMiddleware(admission), admission, limiting);
  }

  // ---- RunHost -------------------------------------------------------------------------------

  boundOutput(value: unknown, flowName: string): Json | undefined {
    return boundedJson(value, `output of flow "${flowName}"`, this.limits.maxOutputBytes);
  }

  parked(run: Run): void {
    this.tasks.background(this.leases.release(run.id, run.fence));
    this.cache.add(run);
  }

  ended(run: Run): void {
    // The terminal batch released the lease in its own transaction.
    this.forget(run);
    // Its batch may have written wake rows (a parent, children): act on them now, not at the
    // next poll.
    // An execution of a queue frees a slot (queues.ts QU5).
    if (run.state._parent || run.state._children || run.state._queue) this.nudge();
    this.outcomes.set(run.id, outcomeOf(run.state));
    if (this.outcomes.size > RECENT_OUTCOMES) {
      const oldest = this.outcomes.keys().next().value;
      if (oldest !== undefined) this.outcomes.delete(oldest);
    }
  }

  stopped(run: Run, error: Error): void {
    this.forget(run);
    if (error instanceof FencedError) this.fencedRuns++;
    if (error instanceof NonDeterminismError) this.markStuck(run.id, error);
    this.tasks.background(this.leases.release(run.id, run.fence));
  }

  renew(run: Run): void {
    const fence = run.fence;
    const renewal = this.store
      .renewLease(run.id, this.ownerId, fence, {
        ttlMs: this.leaseTtlMs,
        nowMs: this.clock.now(),
      })
      .then((ok) => {
        // A renewal that lands after the run parked and took a new fence says nothing about it.
        if (!ok && run.active && run.fence === fence) {
          run.stop(
            new FencedError(`execution "${run.id}": the lease was taken over; this owner stops`),
          );
        }
      });
    this.tasks.background(renewal);
  }

  readInbox(chainId: string, topic: string, afterSeq: number): Promise<InboxMessage[]> {
    return this.store.readMessages(chainId, topic, afterSeq, READ_BATCH);
  }

  armTimer(executionId: string, callId: string, wakeAtMs: number): void {
    if (!this.closed) this.timers.arm(executionId, callId, wakeAtMs);
  }

  disarmTimer(executionId: string, callId: string): void {
    this.timers.disarm(executionId, callId);
  }

  report(e: unknown): void {
    const error = e instanceof Error ? e : new Error(String(e));
    if (this.options.onError) this.options.onError(error);
    else if (!(error instanceof RuntimeClosedError)) console.error(`loom: ${error.message}`);
  }

  // ---- what every room uses ------------------------------------------------------------------

  assertOpen(): void {
    if (this.closed) throw new RuntimeClosedError("the runtime is closed");
  }

  /** Runs the background duties now (wake rows just written), where they run at all. */
  nudge(): void {
    this.loop?.nudge();
  }

  /**
   * An execution this runtime cannot drive with its code (non-determinism, a version it does not
   * accept): remembered so recovery does not retry it in a loop, and reported once, so a worker
   * does not leave it stuck in silence.
   */
  markStuck(id: string, error: Error): void {
    if (this.stuck.has(id)) return;
    this.stuck.set(id, error);
    this.report(error);
  }

  activeRuns(): number {
    let n = 0;
    for (const run of this.runs.values()) if (run.active) n++;
    return n;
  }

  forget(run: Run): void {
    if (this.runs.get(run.id) === run) this.runs.delete(run.id);
    this.cache.remove(run);
  }

  /**
   * Acts on what other processes posted to this owner: a cancel stops the run, which aborts its
   * in-flight effects. Only runtimes that drive something ask (one indexed read).
   */
  async takeNotices(): Promise<void> {
    if (this.takingNotices || this.closed || this.activeRuns() === 0) return;
    this.takingNotices = true;
    try {
      for (const n of await this.store.takeNotices(this.ownerId)) {
        const run = this.runs.get(n.executionId);
        if (n.kind === "cancel" && run?.live) {
          run.stop(new CancelledError(`execution "${run.id}" was cancelled by another process`));
        }
      }
    } catch (e) {
      this.report(e);
    } finally {
      this.takingNotices = false;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.loop?.stop();
    if (this.noticeLoop) clearInterval(this.noticeLoop);
    this.timers.clear();
    await this.fleet?.close().catch((e: unknown) => this.report(e));
    const error = new RuntimeClosedError("the runtime was closed");
    for (const run of [...this.runs.values()]) run.stop(error);
    await this.journal.drain();
    await this.tasks.drain();
    // Duties in flight (a claim whose leases come back after the close) finish, and give back
    // what they took, before the store goes; bounded, since a duty stops at its next check.
    await this.loop?.settled(CLOSE_WAIT_MS);
    // members.ts M2: after the last heartbeat settled.
    if (this.membership.lastBeatMs !== undefined) {
      await this.store.leaveFleet(this.ownerId).catch((e: unknown) => this.report(e));
    }
    if (this.options.closeStore !== false) await this.store.close();
  }
}
