/**
 * What the runtime is made of beneath its public API (runtime.ts, whose head states W1..W6): its
 * state, the RunHost a Run calls back, and the internals that start, deliver to, drive, route and
 * recover executions.
 */
import { sealStore } from "../trust/sealed-store.ts";
import { isTerminalStatus } from "../kernel/events.ts";
import type { Envelope } from "../kernel/events.ts";
import {
  CancelledError,
  ExecutionEndedError,
  ExecutionNotFoundError,
  FencedError,
  FlowVersionError,
  InvalidInputError,
  LeaseHeldError,
  NonDeterminismError,
  NotResumableError,
  RuntimeClosedError,
  SequenceConflictError,
  UnauthorizedError,
} from "../kernel/errors.ts";
import { boundedJson, type Json } from "../kernel/json.ts";
import { DEFAULT_LIMITS, type Limits } from "../kernel/limits.ts";
import type { Clock, IdSource } from "../kernel/clock.ts";
import { initialState, type ExecutionState } from "../fold/state.ts";
import { isFleetStore, type InboxMessage, type Lease, type Store } from "../store/spi.ts";
import { makeContext, type ContextDeps } from "./context.ts";
import { defaultMiddleware, effectChain, type MiddlewareContext } from "../effects/middleware.ts";
import { type Flow } from "./flow.ts";
import { Journal } from "./journal.ts";
import { newOwnerId } from "./owner.ts";
import { Leases } from "./leases.ts";
import { appendSpecs, endEvent, loadStart, loadState, mustLoad } from "./load-state.ts";
import { Tasks, positive } from "./runtime-support.ts";
import { rotate, startedSuccessor, type ChainDeps } from "./continuation.ts";
import { cursorOf, deliverySpecs, READ_BATCH } from "./inbox.ts";
import type { CallerOptions, RuntimeOptions } from "./runtime-options.ts";
import { chainOf } from "../fold/state.ts";

import { Run, type EventSpec, type RunHost } from "./run.ts";
import { outcomeOf, type Outcome } from "./outcome.ts";
import { ParkedCache } from "./parked-cache.ts";
import { TimerService } from "./timer-service.ts";
import { delay, randomIds, systemClock } from "./system.ts";
import { FleetMember } from "./fleet.ts";
import { Tracing } from "./tracing.ts";
import { BackgroundLoop } from "./background-loop.ts";
import { cancelExecution, cancelSpecs } from "./cancel.ts";
import {
  childOutcome,
  isWake,
  onWake,
  spawnedInChain,
  startChild,
  type SupervisorDeps,
  WATCH_EVERY_MS,
} from "./supervisor.ts";

const RECENT_OUTCOMES = 1000;

/**
 * What `make` gives, as a list. A module function, not a closure made per delivery: tsx names
 * every named closure it creates with an Object.defineProperty, about 1 µs on every resume.
 */
function specsOf(
  make: (state: ExecutionState) => EventSpec | readonly EventSpec[] | undefined,
  state: ExecutionState,
): readonly EventSpec[] {
  const made = make(state);
  return made === undefined ? [] : "kind" in made ? [made] : made;
}

export abstract class RuntimeCore implements RunHost {
  readonly store: Store;
  readonly clock: Clock;
  readonly journal: Journal;
  readonly leaseTtlMs: number;
  readonly ownerId: string;
  readonly limits: Limits;
  protected readonly ids: IdSource;
  readonly snapshotEvery: number;
  readonly tracing: Tracing;
  protected readonly maxActive: number;
  protected readonly maxCarryBytes: number;
  protected readonly maxChainHops: number;
  /** `features.continueAsNew`: chains exist, so addressing routes to a chain's head. */
  protected readonly chains: boolean;
  protected readonly pollIntervalMs: number;
  protected readonly flows = new Map<string, Flow>();
  protected readonly runs = new Map<string, Run>();
  protected readonly stuck = new Map<string, Error>();
  /** Outcomes of executions that ended here recently: a fact in the log, kept to skip a read. */
  protected readonly outcomes = new Map<string, Outcome>();
  /** Addressed id -> the head routing last found (a verified member of the same chain). */
  protected readonly knownHeads = new Map<string, string>();
  protected readonly tasks = new Tasks((e) => this.report(e));
  protected readonly cache: ParkedCache;
  protected readonly chain: (ctx: MiddlewareContext) => Promise<unknown>;
  protected readonly leases: Leases;
  protected readonly timers: TimerService;
  /** Due timers, schedules and recovery, when the background loop runs (background-loop.ts). */
  protected readonly loop: BackgroundLoop | undefined;
  /** A fleet member's claims and wakes, when the store is shared by a fleet (fleet.ts). */
  protected readonly fleet: FleetMember | undefined;
  protected noticeLoop: NodeJS.Timeout | undefined;
  protected takingNotices = false;
  /** Runs this runtime stopped because another owner took their lease over (fleet L2). */
  fencedRuns = 0;
  protected closed = false;

  constructor(protected readonly options: RuntimeOptions) {
    this.clock = options.clock ?? systemClock;
    this.store = sealStore(options.store, {
      codec: options.codec,
      audit: options.audit,
      clock: this.clock,
    });
    this.ids = options.ids ?? randomIds;
    this.ownerId = options.ownerId ?? newOwnerId();
    this.leaseTtlMs = positive(options.leaseTtlMs, 30_000, "leaseTtlMs");
    this.snapshotEvery = positive(options.snapshotEvery, 1000, "snapshotEvery");
    this.pollIntervalMs = positive(options.pollIntervalMs, 500, "pollIntervalMs");
    this.maxActive = positive(options.maxActive, Infinity, "maxActive");
    this.maxCarryBytes = positive(options.maxCarryBytes, 1024 * 1024, "maxCarryBytes");
    this.maxChainHops = positive(options.maxChainHops, 8, "maxChainHops");
    this.chains = options.features?.continueAsNew === true;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.journal = new Journal(this.store);
    this.tracing = new Tracing(options.tracerProvider);
    this.chain = effectChain(options.middleware ?? defaultMiddleware());
    this.leases = new Leases(this.store, this.ownerId, this.clock, this.leaseTtlMs, () =>
      this.assertOpen(),
    );
    this.cache = new ParkedCache(
      options.cache?.maxExecutions ?? 1000,
      options.cache?.maxBytes ?? 256 * 1024 * 1024,
      (run) => run.stop(new RuntimeClosedError(`execution "${run.id}" was evicted from the cache`)),
    );
    this.timers = new TimerService(this.clock, (id, callId) => this.fireTimer(id, callId));
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
            [() => this.fireDueTimers(), () => this.fireSchedules(), () => this.recoverAbandoned()],
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

  /** Cancels exactly `id` (no routing); true when this call ended it. */
  protected async cancelOne(id: string, why: Json): Promise<boolean> {
    const cancelled = await this.tasks.exclusive(id, () =>
      cancelExecution(
        {
          store: this.store,
          journal: this.journal,
          clock: this.clock,
          leases: this.leases,
          ownerId: this.ownerId,
          run: (x) => this.runs.get(x),
          drop: (run) => {
            this.cache.remove(run);
            run.stop(new CancelledError(`execution "${run.id}" was cancelled`));
          },
        },
        id,
        why,
      ),
    );
    // A stuck execution (code that cannot replay it) is settled by the cancel: its outcome is
    // the log's from now on. Its batch may have written wake rows (children, a parent): now.
    if (cancelled) {
      this.stuck.delete(id);
      this.nudge();
    }
    return cancelled;
  }

  /** Answers the execution's suspend (the oldest waiting one, or the next one it makes). */
  protected async resumeOne(target: string, json: Json | undefined): Promise<void> {
    const rotating = this.runs.get(target);
    if (rotating?.rotating) {
      // Its generation is ending: the resume belongs to the successor (routed by the caller).
      await rotating.done.catch(() => undefined);
      throw new NotResumableError(`execution "${target}" continued while the resume was sent`);
    }
    await this.tasks.exclusive(target, () =>
      this.deliver(
        target,
        (state) => {
          if (isTerminalStatus(state.status)) {
            throw new NotResumableError(
              `execution "${target}" has ended (${state.status}) and cannot be resumed`,
            );
          }
          const payload: Json = json === undefined ? {} : { payload: json };
          return { kind: "RESUMED", payload };
        },
        true,
        // A generation whose successor started (a rotation not yet committed, or crashed
        // before its commit) would keep the payload from the chain: refused, the caller routes.
        this.chains ? (state) => this.refuseIfSucceeded(state) : undefined,
      ),
    );
  }

  /** NotResumableError when `state`'s verified successor has a log (one point read). */
  protected async refuseIfSucceeded(state: ExecutionState): Promise<void> {
    // A run held here that no other owner touched since it was last driven here has started no
    // successor unless it is rotating (a successor is started by the run that holds it).
    const held = this.runs.get(state.executionId);
    if (held?.state === state && held.live && held.untouched && !held.rotating) return;
    if ((await startedSuccessor(this.store, state)) !== undefined) {
      throw new NotResumableError(`execution "${state.executionId}" has a successor`);
    }
  }

  /**
   * ADR 0111, smallest form: an execution started with a `principal` is its owner's; resume,
   * send, cancel, fork and reads are refused (UnauthorizedError) unless the caller names it as
   * `as`. One point read of the addressed id's sequence 0 (or memory), before anything else is
   * read, so a refused caller learns nothing of the chain. An id with no log passes here and
   * fails where the operation needs it.
   */
  protected async authorize(id: string, options: CallerOptions): Promise<void> {
    if (options === null || typeof options !== "object") {
      throw new InvalidInputError("caller options must be an object");
    }
    const held = this.runs.get(id)?.state;
    const owner = held ? held._principal : (await loadStart(this.store, id))?._principal;
    if (owner === undefined || owner === options.as) return;
    throw new UnauthorizedError(
      `${options.as === undefined ? "an anonymous caller" : `principal ${JSON.stringify(options.as)}`} may not act on execution "${id}": it belongs to another principal`,
      { executionId: id },
    );
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
    if (run.state._parent || run.state._children) this.nudge();
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

  // ---- internals -----------------------------------------------------------------------------

  /**
   * Writes sequence 0. The first try claims the lease in the same transaction (fence 1, no lease
   * row yet); when a lease row exists (a creator that crashed, a concurrent start) it takes the
   * lease first. A conflict on sequence 0 means another start won: adopt it (W5).
   */
  protected async create(
    flow: Flow,
    id: string,
    payload: { [k: string]: Json },
    accept: (existing: ExecutionState) => void,
    /** Appended with sequence 0, in its batch (a restore's STATE_RESTORED). */
    extra: readonly EventSpec[] = [],
    /** Drive it here (else its lease is released at once, for a worker to claim). */
    drive = true,
  ): Promise<void> {
    const giveUpAt = this.clock.now() + this.leaseTtlMs * 2;
    let fence: number | undefined = 1;
    for (;;) {
      const known = this.runs.get(id)?.state ?? (await loadStart(this.store, id));
      if (known) return accept(known);
      fence ??= (await this.leases.acquireIfDead(id))?.fence;
      if (fence !== undefined) {
        const claim =
          fence === 1
            ? { owner: this.ownerId, expiresAtMs: this.clock.now() + this.leaseTtlMs }
            : undefined;
        const outcome = await this.writeStart(flow, id, payload, fence, claim, extra, drive);
        if (outcome === "started") return;
        fence = undefined;
        if (outcome === "fenced") continue;
      }
      if (this.clock.now() > giveUpAt) {
        throw new LeaseHeldError(`execution "${id}" is being created by another owner; try again`);
      }
      await delay(25);
    }
  }

  protected async writeStart(
    flow: Flow,
    id: string,
    payload: { [k: string]: Json },
    fence: number,
    claimLease: { owner: string; expiresAtMs: number } | undefined,
    extra: readonly EventSpec[] = [],
    drive = true,
  ): Promise<"started" | "fenced" | "taken"> {
    const run = new Run(this, flow, initialState(id), fence);
    this.runs.set(id, run);
    try {
      const specs: EventSpec[] = [{ kind: "EXECUTION_STARTED", payload }, ...extra];
      // Not driven here: the lease goes back in the same transaction (a worker claims it).
      const release = drive ? {} : { release: true as const };
      await run.enqueue(specs, claimLease ? { claimLease, ...release } : release);
    } catch (e) {
      this.forget(run);
      if (e instanceof FencedError) return "fenced";
      if (e instanceof SequenceConflictError || e instanceof ExecutionEndedError) return "taken";
      throw e;
    }
    if (!drive) {
      // Recorded, not driven: its batch released the lease, and a worker claims the execution.
      this.forget(run);
      return "started";
    }
    this.begin(run, true);
    return "started";
  }

  /**
   * Starts a run's body, after K4's check for a successor that has not run a step yet: when its
   * predecessor was cancelled, it cancels itself (reason `{ kind: "cascade", parent }`) instead.
   */
  protected begin(run: Run, created = false): void {
    const from = run.state._chain?.continuedFrom?.executionId;
    const fresh = from !== undefined && Object.keys(run.state.frames).length === 0;
    // A brand-new execution has no successor to find: only a re-driven one is probed.
    if ((!this.chains || created) && !fresh) {
      run.startBody(makeContext(run, this.contextDeps()));
      return;
    }
    void this.beginChained(run, fresh ? from : undefined, !created).catch((e: unknown) =>
      run.stop(e instanceof Error ? e : new Error(String(e))),
    );
  }

  /**
   * Before a chain member's body runs: K1's repair and K4 (ii).
   * - A generation whose verified successor already has a log (re-driven after a crash between
   *   the successor's start and its own commit) commits EXECUTION_CONTINUED at once: that is
   *   where its replay would lead, and running its body first could end it otherwise (its
   *   deadline, say) while its successor lives on.
   * - A fresh successor whose predecessor's log says cancelled cancels itself.
   */
  private async beginChained(
    run: Run,
    predecessor: string | undefined,
    probe: boolean,
  ): Promise<void> {
    if (this.chains && probe) {
      const successorId = await startedSuccessor(this.store, run.state);
      if (!run.active) return;
      if (successorId !== undefined) {
        const chain = chainOf(run.state);
        run.rotating = true;
        const payload = { successorId, chainId: chain.chainId, generation: chain.generation + 1 };
        await run.enqueue([{ kind: "EXECUTION_CONTINUED", payload, kernel: true }]);
        return;
      }
    }
    if (predecessor !== undefined && (await this.wasCancelled(predecessor))) {
      if (!run.active) return;
      const reason = { kind: "cascade", parent: predecessor };
      const error = new CancelledError(
        `execution "${run.id}" was cancelled: its predecessor "${predecessor}" was cancelled`,
      );
      run.enqueueDetached(cancelSpecs(run.state, reason, this.clock.now(), error));
      return;
    }
    if (run.active) run.startBody(makeContext(run, this.contextDeps()));
  }

  /**
   * Appends one piece of external input (a resume, a fired timer) and keeps the execution going:
   * through the cached run when there is one, else under a lease taken here, driving the body
   * if this runtime has its flow.
   */
  protected async deliver(
    id: string,
    make: (state: ExecutionState) => EventSpec | readonly EventSpec[] | undefined,
    waitForLease: boolean,
    /** Checked (and may throw) once the state to append to is known, just before `make`. */
    check?: (state: ExecutionState) => Promise<void>,
  ): Promise<boolean> {
    const run = await this.ownedRun(id);
    this.assertOpen();
    if (run) {
      await check?.(run.state);
      // Its rotation began while the check read: what is appended now may miss the carry.
      if (check && run.rotating) {
        throw new NotResumableError(`execution "${id}" is continuing into a successor`);
      }
      const specs = specsOf(make, run.state);
      if (specs.length > 0) await run.enqueue(specs);
      else run.maybePark();
      return true;
    }
    if ((await this.store.head(id)) < 0) {
      throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
    }
    const lease = waitForLease
      ? await this.leases.acquireWaiting(id)
      : await this.leases.acquireIfDead(id);
    // Another live owner holds it: it was not delivered (false), and the caller may try again.
    if (!lease) return false;
    let handedOver = false;
    try {
      this.assertOpen();
      const state = await mustLoad(this.store, id);
      await check?.(state);
      const specs = specsOf(make, state);
      if (specs.length > 0) {
        await appendSpecs(this.journal, this.clock, state, lease.fence, specs);
      }
      handedOver = this.drive(state, lease);
    } finally {
      if (!handedOver) await this.leases.release(id, lease.fence);
    }
    return true;
  }

  /** Hands the chain's waiting messages to `id`'s receives, if it has any waiting (N3). */
  protected async deliverMessages(id: string, chainId: string, topic: string): Promise<void> {
    const known = this.runs.get(id)?.state;
    const messages = await this.readInbox(chainId, topic, known ? cursorOf(known, topic) : -1);
    if (messages.length === 0) return;
    await this.deliver(id, (state) => deliverySpecs(state, topic, messages), true);
  }

  /** True when `id`'s log ends in a kernel EXECUTION_CONTINUED (one point read, or memory). */
  protected async isContinued(id: string): Promise<boolean> {
    const run = this.runs.get(id);
    if (run) return run.state.status === "continued";
    return (await this.lastEvent(id))?.kind === "EXECUTION_CONTINUED";
  }

  /**
   * True when `id` ended cancelled (K4 (ii)), as the log says: a run in memory may be rotating
   * while another process's cancel is already durable.
   */
  protected async wasCancelled(id: string): Promise<boolean> {
    return (await this.lastEvent(id))?.kind === "EXECUTION_CANCELLED";
  }

  /** The last event of `id`'s log when it is a terminal one (two point reads). */
  protected async lastEvent(id: string): Promise<Envelope | undefined> {
    return endEvent(this.store, id);
  }

  /**
   * The run of `id` this runtime drives, taking the lease back for a cached one (W2). A cached
   * run that another owner drove meanwhile is stopped, so nothing waits on it in vain.
   */
  protected async ownedRun(id: string): Promise<Run | undefined> {
    const run = this.runs.get(id);
    if (!run?.live) return undefined;
    if (run.phase === "active") return run;
    this.cache.remove(run);
    const lease = await this.leases.acquire(id);
    const stale = () =>
      run.stop(
        new FencedError(
          `execution "${id}" was driven by another owner; the cached body is dropped`,
        ),
      );
    if (!lease) {
      stale();
      return undefined;
    }
    const from = run.state.seq + 1;
    // Every acquire moves the fence (S6) and every append needs the lease (S3): a fence one past
    // the parked run's means no other owner held it since, so nothing was appended meanwhile.
    run.untouched = lease.fence === run.fence + 1;
    const tail = run.untouched ? [] : await this.store.read(id, from);
    // A gap in the tail (another owner drove it, then it was compacted) is not external input.
    const external = tail.every(
      (e, i) =>
        e.seq === from + i &&
        (e.kind === "RESUMED" || e.kind === "TIMER_FIRED" || e.kind === "MESSAGE_CONSUMED"),
    );
    if (this.closed || !external || !run.reactivate(lease.fence)) {
      if (!external) stale();
      await this.leases.release(id, lease.fence);
      return undefined;
    }
    run.absorbCommitted(tail);
    return run.active ? run : undefined;
  }

  /** Starts a Run over `state` when this runtime can drive it; false when it cannot. */
  protected drive(state: ExecutionState, lease: Lease): boolean {
    if (this.closed || (state.status !== "running" && state.status !== "pending")) return false;
    const flow = this.flows.get(state.flow);
    if (!flow) return false;
    if (
      state.flowVersion !== flow.version &&
      !flow.compatibleVersions.includes(state.flowVersion)
    ) {
      this.markStuck(
        state.executionId,
        new FlowVersionError(
          `execution "${state.executionId}" was started by flow "${flow.name}" version "${state.flowVersion}" (code ${state.fingerprint}); ` +
            `the registered flow is version "${flow.version}" (code ${flow.fingerprint}), which does not list "${state.flowVersion}" in compatibleVersions`,
          {
            executionId: state.executionId,
            recordedVersion: state.flowVersion,
            registeredVersion: flow.version,
          },
        ),
      );
      return false;
    }
    const run = new Run(this, flow, state, lease.fence);
    run.approxBytes = JSON.stringify(state).length;
    this.runs.set(state.executionId, run);
    this.begin(run);
    return true;
  }

  protected async recoverOne(id: string): Promise<boolean> {
    const cached = this.runs.get(id);
    if (cached?.phase === "parked") {
      const run = await this.ownedRun(id);
      run?.maybePark();
      return run !== undefined;
    }
    if (cached?.live) return false;
    const lease = await this.leases.acquireIfDead(id);
    if (!lease) return false;
    const state = await loadState(this.store, id);
    const driven = state !== undefined && this.drive(state, lease);
    if (!driven) await this.leases.release(id, lease.fence);
    return driven;
  }

  protected async fireTimer(id: string, callId: string): Promise<void> {
    if (this.closed) return;
    if (isWake(callId)) return this.fireWake(id, callId);
    const make = (state: ExecutionState): EventSpec | undefined => {
      const f = Object.hasOwn(state.frames, callId) ? state.frames[callId] : undefined;
      if (isTerminalStatus(state.status) || f?.status !== "waiting" || f.wakeAtMs === undefined) {
        this.tasks.background(this.store.deleteTimer(id, callId));
        return undefined;
      }
      if (f.wakeAtMs > this.clock.now()) return undefined;
      return { kind: "TIMER_FIRED", payload: { callId } };
    };
    try {
      // A timer never waits for a lease: a live owner fires its own timers.
      await this.tasks.exclusive(id, () => this.deliver(id, make, false));
    } catch (e) {
      if (!(e instanceof RuntimeClosedError) && !(e instanceof ExecutionNotFoundError))
        this.report(e);
    }
  }

  protected async fireDueTimers(): Promise<void> {
    const due = await this.store.dueTimers(this.clock.now(), 200);
    for (const t of due) {
      if (this.closed) return;
      const run = this.runs.get(t.executionId);
      if (run?.phase === "active" && this.timers.armed(t.executionId, t.timerId)) continue;
      await this.fireTimer(t.executionId, t.timerId);
    }
  }

  /**
   * Acts on what other processes posted to this owner: a cancel stops the run, which aborts its
   * in-flight effects. Only runtimes that drive something ask (one indexed read).
   */
  protected async takeNotices(): Promise<void> {
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

  /** Runs the background duties now (wake rows just written), where they run at all. */
  protected nudge(): void {
    this.loop?.nudge();
  }

  /**
   * An execution this runtime cannot drive with its code (non-determinism, a version it does not
   * accept): remembered so recovery does not retry it in a loop, and reported once, so a worker
   * does not leave it stuck in silence.
   */
  protected markStuck(id: string, error: Error): void {
    if (this.stuck.has(id)) return;
    this.stuck.set(id, error);
    this.report(error);
  }

  protected activeRuns(): number {
    let n = 0;
    for (const run of this.runs.values()) if (run.active) n++;
    return n;
  }

  protected forget(run: Run): void {
    if (this.runs.get(run.id) === run) this.runs.delete(run.id);
    this.cache.remove(run);
  }

  protected contextDeps(): ContextDeps {
    return {
      limits: this.limits,
      now: () => this.clock.now(),
      chain: this.chain,
      readInbox: (chainId, topic, afterSeq) => this.readInbox(chainId, topic, afterSeq),
      maxCarryBytes: this.maxCarryBytes,
      rotate: this.chains
        ? (run, carry) => void rotate(this.chainDeps(), run, carry, () => run.quiesced())
        : undefined,
      children: {
        flow: (name) => this.flows.get(name),
        startChild: (parent, childId) => startChild(this.supervisorDeps(), parent, childId),
        childOutcome: (childId) => childOutcome(this.supervisorDeps(), childId),
        spawnedInChain: (childId, chainId) => spawnedInChain(this.store, childId, chainId),
      },
    };
  }

  /** What the supervisor acts through (supervisor.ts). */
  protected supervisorDeps(): SupervisorDeps {
    return {
      store: this.store,
      maxChainHops: this.maxChainHops,
      flow: (name) => this.flows.get(name),
      create: (flow, id, payload, accept) =>
        this.tasks.exclusive(id, () => this.create(flow, id, payload, accept)),
      deliver: async (id, make) => {
        // A generation with a successor would keep the outcome from the slot it carried there.
        const check = this.chains ? (s: ExecutionState) => this.refuseIfSucceeded(s) : undefined;
        try {
          return await this.tasks.exclusive(id, () => this.deliver(id, make, false, check));
        } catch (e) {
          if (!(e instanceof NotResumableError)) throw e;
          // A rotation held here is not waited for in the tick: the row is tried again (its end
          // nudges the loop). A successor that exists is routed to at once.
          return this.runs.get(id)?.rotating ? false : "moved";
        }
      },
      cancel: (id, reason) => this.cancelRouted(id, reason),
    };
  }

  /** A supervisor's wake row came due (supervisor.ts): its row goes once it is acted on. */
  protected async fireWake(id: string, timerId: string): Promise<void> {
    try {
      const done = await onWake(this.supervisorDeps(), id, timerId);
      if (done === true) {
        await this.store.deleteTimer(id, timerId);
      } else {
        // Tried again later, behind the rows due now, so that rows that cannot be acted on yet
        // (held by another live owner, a watched child still running) never fill a tick's batch.
        const after = done === "later" ? WATCH_EVERY_MS : this.pollIntervalMs;
        await this.store.deferTimer(id, timerId, this.clock.now() + after);
      }
    } catch (e) {
      if (!(e instanceof RuntimeClosedError)) this.report(e);
    }
  }

  protected chainDeps(): ChainDeps {
    return {
      store: this.store,
      clock: this.clock,
      maxChainHops: this.maxChainHops,
      flow: (name) => this.flows.get(name),
      startSuccessor: (flow, id, payload, accept) =>
        this.tasks.exclusive(id, () => this.create(flow, id, payload, accept)),
      cancel: (id, reason) => this.cancelOne(id, reason),
      cancelled: (id) => this.wasCancelled(id),
      report: (e) => this.report(e),
    };
  }

  report(e: unknown): void {
    const error = e instanceof Error ? e : new Error(String(e));
    if (this.options.onError) this.options.onError(error);
    else if (!(error instanceof RuntimeClosedError)) console.error(`loom: ${error.message}`);
  }

  protected assertOpen(): void {
    if (this.closed) throw new RuntimeClosedError("the runtime is closed");
  }

  /** Starts every due schedule occurrence (runtime.ts). */
  abstract fireSchedules(): Promise<string[]>;
  /** Re-drives abandoned executions (runtime.ts, W6). */
  abstract recoverAbandoned(): Promise<string[]>;
  /** Cancels `id` and its chain's live generation with `why` (runtime.ts). */
  protected abstract cancelRouted(id: string, why: Json): Promise<boolean>;
}
