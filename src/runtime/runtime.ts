/**
 * The runtime: registers flows, starts and resumes executions, owns them under leases, fires
 * their timers and recovers abandoned ones.
 *
 * Invariants (tests cite W1..W6):
 * W1. An execution is driven by at most one Run at a time, under a lease whose fence every
 *     append carries; a runtime drives an execution only while it holds the lease.
 * W2. A parked run releases its lease and stays cached; before it is driven again its lease is
 *     re-acquired and the log's tail checked: anything but external input (RESUMED, TIMER_FIRED)
 *     appended meanwhile means another owner drove it, and the cached body is dropped.
 * W3. Operations from outside a body on one execution (start, resume, a fired timer, recovery)
 *     run one at a time in this runtime.
 * W4. Every refusal (unknown flow, bad id, bad input, too large) is raised before any append.
 * W5. A caller-chosen id is an idempotent start: the same flow and input return the existing
 *     execution; anything else is ExecutionConflictError.
 * W6. recoverAbandoned re-drives every pending or running execution whose owner is gone (its
 *     lease released, expired, or held by a dead process on this host); it is the only repair.
 */
import { isTerminalEvent, isTerminalStatus } from "../kernel/events.ts";
import type { Envelope } from "../kernel/events.ts";
import {
  CancelledError,
  ExecutionEndedError,
  ExecutionNotFoundError,
  FencedError,
  FlowVersionError,
  InvalidInputError,
  InvariantViolation,
  LeaseHeldError,
  NonDeterminismError,
  NotResumableError,
  RuntimeClosedError,
  SequenceConflictError,
  UnauthorizedError,
  UnknownFlowError,
  WaitTimeoutError,
  isLoomError,
} from "../kernel/errors.ts";
import { boundedJson, type Json } from "../kernel/json.ts";
import { assertValidId } from "../kernel/ids.ts";
import { DEFAULT_LIMITS, type Limits } from "../kernel/limits.ts";
import type { Clock, IdSource } from "../kernel/clock.ts";
import { initialState, type ExecutionState } from "../fold/state.ts";
import type {
  ExecutionSummary,
  InboxMessage,
  Lease,
  ListQuery,
  Schedule,
  Store,
} from "../store/spi.ts";
import { makeContext, type ContextDeps } from "./context.ts";
import { defaultMiddleware, effectChain, type MiddlewareContext } from "../effects/middleware.ts";
import { checkedBudget, isFlow, type Flow } from "./flow.ts";
import { Journal } from "./journal.ts";
import { newOwnerId } from "./owner.ts";
import { Leases } from "./leases.ts";
import { appendSpecs, loadStart, loadState, mustLoad } from "./load-state.ts";
import {
  Tasks,
  assertCreatable,
  assertSameStart,
  checkedPrincipal,
  positive,
  startPayload,
  withDeadline,
} from "./runtime-support.ts";
import { rotate, routeToHead, type ChainDeps } from "./continuation.ts";
import { writeFork } from "./fork.ts";
import { chainOf } from "../fold/state.ts";
import {
  checkedName,
  cursorOf,
  DEFAULT_TOPIC,
  deliverySpecs,
  READ_BATCH,
  type SendOptions,
} from "./inbox.ts";
import type {
  CallerOptions,
  ExecutionHandle,
  RuntimeOptions,
  StartOptions,
} from "./runtime-options.ts";

export type {
  CallerOptions,
  ExecutionHandle,
  RuntimeOptions,
  StartOptions,
} from "./runtime-options.ts";
import { Run, type EventSpec } from "./run.ts";
import { outcomeOf, type Outcome } from "./outcome.ts";
import type { RunHost } from "./run-host.ts";
import { ParkedCache } from "./parked-cache.ts";
import { TimerService } from "./timer-service.ts";
import { delay, randomIds, systemClock } from "./system.ts";
import { cancelExecution, cancelSpecs, checkedReason } from "./cancel.ts";
import { subscribeDeltas, type LiveDelta } from "../providers/deltas.ts";
import { checkedDuration } from "./deadline.ts";
import { checkedScheduleName, cronOf, fireSchedules, type ScheduleOptions } from "./schedules.ts";

const RECENT_OUTCOMES = 1000;
/** How many addressed ids remember the chain head routing last found for them. */
const KNOWN_HEADS = 1000;

export function createRuntime(options: RuntimeOptions): Runtime {
  return new Runtime(options);
}

export class Runtime implements RunHost {
  readonly store: Store;
  readonly clock: Clock;
  readonly journal: Journal;
  readonly leaseTtlMs: number;
  readonly ownerId: string;
  readonly limits: Limits;
  private readonly ids: IdSource;
  readonly snapshotEvery: number;
  private readonly maxActive: number;
  private readonly maxCarryBytes: number;
  private readonly maxChainHops: number;
  /** `features.continueAsNew`: chains exist, so addressing routes to a chain's head. */
  private readonly chains: boolean;
  private readonly pollIntervalMs: number;
  private readonly flows = new Map<string, Flow>();
  private readonly runs = new Map<string, Run>();
  private readonly stuck = new Map<string, Error>();
  /** Outcomes of executions that ended here recently: a fact in the log, kept to skip a read. */
  private readonly outcomes = new Map<string, Outcome>();
  /** Addressed id -> the head routing last found (a verified member of the same chain). */
  private readonly knownHeads = new Map<string, string>();
  private readonly tasks = new Tasks((e) => this.report(e));
  private readonly cache: ParkedCache;
  private readonly chain: (ctx: MiddlewareContext) => Promise<unknown>;
  private readonly leases: Leases;
  private readonly timers: TimerService;
  private loop: NodeJS.Timeout | undefined;
  private noticeLoop: NodeJS.Timeout | undefined;
  private takingNotices = false;
  private ticking = false;
  private closed = false;

  constructor(private readonly options: RuntimeOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
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
    if (options.background !== false) {
      this.scheduleTick(0);
      const every = positive(options.noticePollMs, 50, "noticePollMs");
      this.noticeLoop = setInterval(() => void this.takeNotices(), every);
      this.noticeLoop.unref();
    }
  }

  registerFlow(flow: Flow): this {
    if (!isFlow(flow)) throw new InvalidInputError("registerFlow needs a flow made with flow$");
    const existing = this.flows.get(flow.name);
    if (existing && existing !== flow) {
      throw new InvalidInputError(`a different flow named "${flow.name}" is already registered`);
    }
    if (flow.deadlineMs !== undefined) {
      checkedDuration(flow.deadlineMs, `flow "${flow.name}" deadlineMs`);
    }
    this.flows.set(flow.name, flow);
    if (this.options.background !== false && !this.closed) this.scheduleTick(0);
    return this;
  }

  async start(
    flow: string | Flow,
    input?: unknown,
    options: StartOptions = {},
  ): Promise<ExecutionHandle> {
    this.assertOpen();
    if (isFlow(flow)) this.registerFlow(flow);
    const name = isFlow(flow) ? flow.name : flow;
    const registered = this.flows.get(name);
    if (!registered) {
      const known = [...this.flows.keys()].map((n) => `"${n}"`).join(", ") || "none";
      throw new UnknownFlowError(
        `no flow named ${JSON.stringify(name)} is registered (registered: ${known})`,
      );
    }
    const id = options.id ?? this.ids.newId();
    assertValidId(id);
    assertCreatable(id);
    const json = boundedJson(input, `input of flow "${name}"`, this.limits.maxInputBytes);
    const budget =
      options.budget === undefined
        ? registered.budget
        : checkedBudget(options.budget, `execution "${id}"`);
    const deadlineMs =
      options.deadlineMs === undefined
        ? registered.deadlineMs
        : checkedDuration(options.deadlineMs, `execution "${id}" deadlineMs`);
    const principal = checkedPrincipal(options.principal);
    const payload = startPayload(registered, json, { budget, deadlineMs });
    if (principal !== undefined) payload.principal = principal;
    await this.tasks.exclusive(id, () =>
      this.create(registered, id, payload, (known) => {
        assertSameStart(id, registered.name, json, known.flow, known.input);
        if (known._principal !== principal) {
          throw new UnauthorizedError(
            `execution "${id}" already exists and belongs to another principal`,
            { executionId: id },
          );
        }
      }),
    );
    return this.handle(id);
  }

  handle(id: string): ExecutionHandle {
    return {
      id,
      result: () => this.waitForCompletion(id),
      cancel: (reason) => this.cancel(id, reason),
      deltas: () => this.deltas(id),
    };
  }

  /**
   * The text deltas of the execution's running LLM steps as they stream, in this process, from
   * now until the execution ends (not journaled one by one: the log holds each step's result).
   */
  deltas(id: string): AsyncIterableIterator<LiveDelta> {
    assertValidId(id);
    return subscribeDeltas(
      id,
      this.waitForCompletion(id).catch(() => undefined),
    );
  }

  /**
   * Starts one execution of `flow` per occurrence of `options.cron` on the runtime clock, from
   * now on, with the id `<name>@<ISO time>` (see schedules.ts). Stored, so every runtime that
   * has the flow fires it, and a schedule put again keeps its progress. Idempotent.
   */
  async schedule(flow: string | Flow, options: ScheduleOptions): Promise<Schedule> {
    this.assertOpen();
    if (isFlow(flow)) this.registerFlow(flow);
    const flowName = isFlow(flow) ? flow.name : flow;
    if (!this.flows.has(flowName)) {
      throw new UnknownFlowError(`no flow named ${JSON.stringify(flowName)} is registered`);
    }
    if (options === null || typeof options !== "object") {
      throw new InvalidInputError("schedule needs options with a cron expression");
    }
    const name = checkedScheduleName(options.name ?? flowName);
    const timezone = options.timezone ?? "UTC";
    cronOf(options.cron, timezone, `schedule "${name}"`);
    const input = boundedJson(
      options.input,
      `input of schedule "${name}"`,
      this.limits.maxInputBytes,
    );
    const schedule: Omit<Schedule, "cursorMs"> = {
      name,
      flow: flowName,
      cron: options.cron,
      timezone,
      fromMs: this.clock.now(),
    };
    if (input !== undefined) schedule.input = input;
    await this.store.putSchedule(schedule);
    if (this.options.background !== false && !this.closed) this.scheduleTick(0);
    const stored = (await this.store.listSchedules()).find((s) => s.name === name);
    if (!stored) throw new InvariantViolation(`schedule "${name}" was not stored`);
    return stored;
  }

  /** Removes a schedule; executions it started are not touched. */
  async unschedule(name: string): Promise<void> {
    this.assertOpen();
    await this.store.deleteSchedule(checkedScheduleName(name));
  }

  /**
   * Starts every due occurrence of the schedules whose flow this runtime has (the background loop
   * calls it every poll); returns the ids it started or adopted.
   */
  async fireSchedules(): Promise<string[]> {
    this.assertOpen();
    return fireSchedules({
      store: this.store,
      clock: this.clock,
      flow: (name) => this.flows.get(name),
      start: (flow, input, id) => this.start(flow, input, { id }),
      closed: () => this.closed,
      report: (e) => this.report(e),
    });
  }

  /**
   * Cancels an execution from any process that shares the store (K8.2): fences its lease, writes
   * STEP_CANCELLED for its running steps and EXECUTION_CANCELLED, and makes its owner abort what
   * is in flight. True when this call ended it; false when it had already ended.
   */
  async cancel(id: string, reason?: string, options: CallerOptions = {}): Promise<boolean> {
    this.assertOpen();
    assertValidId(id);
    const why = checkedReason(reason);
    await this.authorize(id, options);
    if (!this.chains) return this.cancelOne(id, why);
    // ADR 0109 D2: a chain member's cancel reaches its live generation. The addressed one is
    // cancelled first (so a successor it starts from now on cancels itself, K4), then every
    // verified successor forward, which covers one started in the start-to-commit window.
    let cancelled = await this.cancelOne(id, why);
    let at = id;
    for (;;) {
      const head = await routeToHead(this.chainDeps(), at);
      if (head === at) return cancelled;
      cancelled = (await this.cancelOne(head, why)) || cancelled;
      at = head;
    }
  }

  /** Cancels exactly `id` (no routing); true when this call ended it. */
  private async cancelOne(id: string, why: Json): Promise<boolean> {
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
    // the log's from now on.
    if (cancelled) this.stuck.delete(id);
    return cancelled;
  }

  /** Answers the execution's suspend (the oldest waiting one, or the next one it makes). */
  async resume(id: string, payload?: unknown, options: CallerOptions = {}): Promise<void> {
    this.assertOpen();
    assertValidId(id);
    const json = boundedJson(
      payload,
      `resume payload for "${id}"`,
      this.limits.maxStepPayloadBytes,
    );
    await this.authorize(id, options);
    // A resume addressed to a continued generation goes to the chain's head (ADR 0109 D4),
    // also when it continued while this resume was on its way (the start-to-commit window).
    let target = this.chains && (await this.isContinued(id)) ? await this.followToHead(id) : id;
    for (let hops = 0; ; hops++) {
      try {
        return await this.resumeOne(target, json);
      } catch (e) {
        if (!this.chains || !(e instanceof NotResumableError) || hops >= this.maxChainHops) throw e;
        if (!(await this.isContinued(target))) throw e;
        target = await this.followToHead(target);
      }
    }
  }

  private async resumeOne(target: string, json: Json | undefined): Promise<void> {
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
      ),
    );
  }

  /**
   * A new execution (`newId`, or a fresh id) whose log is a copy of `id`'s events up to and
   * including `atSequence`, run on from there by this runtime when it has the flow (see
   * fork.ts). A fork of a chain member is a chain of its own (ADR 0109 D7).
   */
  async fork(
    id: string,
    atSequence: number,
    newId?: string,
    options: CallerOptions = {},
  ): Promise<ExecutionHandle> {
    this.assertOpen();
    assertValidId(id);
    const target = newId ?? this.ids.newId();
    assertValidId(target);
    assertCreatable(target);
    await this.authorize(id, options);
    const deps = {
      store: this.store,
      journal: this.journal,
      clock: this.clock,
      ownerId: this.ownerId,
      leaseTtlMs: this.leaseTtlMs,
    };
    await this.tasks.exclusive(target, async () => {
      const state = await writeFork(deps, id, atSequence, target);
      const lease = {
        executionId: target,
        owner: this.ownerId,
        fence: 1,
        expiresAtMs: this.clock.now() + this.leaseTtlMs,
      };
      if (!this.drive(state, lease)) await this.leases.release(target, 1);
    });
    return this.handle(target);
  }

  /**
   * Appends `message` to the inbox of the chain `idOrChainId` belongs to (any of its
   * generations' ids), for `ctx.receive`, and wakes the chain's live generation if it waits.
   * Each message is delivered once; a retry with the same `key` is dropped (within the last
   * 1,024 consumed). Returns the chain and the message's place in its stream.
   */
  async send(
    idOrChainId: string,
    message: unknown,
    options: SendOptions = {},
  ): Promise<{ chainId: string; seq: number }> {
    this.assertOpen();
    assertValidId(idOrChainId);
    if (options === null || typeof options !== "object") {
      throw new InvalidInputError("send options must be an object");
    }
    const topic = checkedName(options.topic, "send topic", DEFAULT_TOPIC);
    const key = checkedName(options.key, "send key", this.ids.newId());
    const payload =
      boundedJson(message, `message for "${idOrChainId}"`, this.limits.maxStepPayloadBytes) ?? null;
    // ADR 0111: authorized against the addressed id before any chain read.
    await this.authorize(idOrChainId, options);
    const head = this.chains ? await this.followToHead(idOrChainId, options) : idOrChainId;
    const state = this.runs.get(head)?.state ?? (await mustLoad(this.store, head));
    if (isTerminalStatus(state.status) && state.status !== "continued") {
      throw new NotResumableError(
        `execution "${head}" has ended (${state.status}): a message to its chain would never be received`,
      );
    }
    const chainId = chainOf(state).chainId;
    const seq = await this.store.appendMessage(chainId, {
      topic,
      key,
      payload,
      atMs: this.clock.now(),
    });
    // Waking is best effort (N2): the message is durable, and a receive re-reads before parking.
    await this.tasks
      .exclusive(head, () => this.deliverMessages(head, chainId, topic))
      .catch((e: unknown) => {
        if (!(e instanceof LeaseHeldError)) throw e;
      });
    return { chainId, seq };
  }

  /**
   * The id of the newest verified generation of the chain `id` belongs to (ADR 0109: routed,
   * O(log n) point reads): `id` itself for an execution that never continued.
   */
  async followToHead(id: string, options: CallerOptions = {}): Promise<string> {
    assertValidId(id);
    await this.authorize(id, options);
    // Routing from the head last found for this id costs a probe, not the chain's walk.
    const known = this.knownHeads.get(id);
    const head = await routeToHead(this.chainDeps(), known ?? id).catch((e: unknown) => {
      // The remembered head may be gone (retention): route from the addressed id itself.
      if (known === undefined) throw e;
      return routeToHead(this.chainDeps(), id);
    });
    this.knownHeads.delete(id);
    this.knownHeads.set(id, head);
    if (this.knownHeads.size > KNOWN_HEADS) {
      const oldest = this.knownHeads.keys().next().value;
      if (oldest !== undefined) this.knownHeads.delete(oldest);
    }
    return head;
  }

  async waitForCompletion(id: string, options: { timeoutMs?: number } = {}): Promise<Outcome> {
    assertValidId(id);
    if (options.timeoutMs !== undefined) positive(options.timeoutMs, 0, "timeoutMs");
    const giveUpAt =
      options.timeoutMs === undefined ? Infinity : performance.now() + options.timeoutMs;
    const remaining = () => giveUpAt - performance.now();
    let pause = 10;
    for (;;) {
      const stuck = this.stuck.get(id);
      if (stuck) throw stuck;
      const ended = this.outcomes.get(id);
      if (ended) return ended;
      const run = this.runs.get(id);
      if (run?.phase === "active") {
        // The run settles `done` while this process drives it; once it parks, another process
        // may finish it, so the log decides from then on.
        const settled = await withDeadline(
          Promise.race([run.done.then((o) => ({ o })), run.whenParked().then(() => undefined)]),
          remaining(),
        ).catch((e: unknown) => {
          if (isLoomError(e, "LOOM_WAIT_TIMEOUT") || e instanceof NonDeterminismError) throw e;
          return undefined;
        });
        if (settled) return settled.o;
        continue;
      }
      this.assertOpen();
      const head = await this.store.head(id);
      if (head < 0) throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
      const last = (await this.store.read(id, head))[0];
      if (last && isTerminalEvent(last)) return outcomeOf(await mustLoad(this.store, id));
      if (remaining() <= 0) {
        throw new WaitTimeoutError(`execution "${id}" did not end within ${options.timeoutMs} ms`);
      }
      await delay(Math.min(pause, Math.max(1, remaining())));
      pause = Math.min(pause * 2, 250);
    }
  }

  async getState(id: string, options: CallerOptions = {}): Promise<ExecutionState> {
    assertValidId(id);
    await this.authorize(id, options);
    const run = this.runs.get(id);
    if (run?.phase === "active" && run.committedSeq === run.state.seq)
      return structuredClone(run.state);
    return mustLoad(this.store, id);
  }

  /**
   * The state of an execution this runtime drives, as far as it is committed: what its run holds
   * in memory, without a store read. Undefined when this runtime drives no such execution (or it
   * has appends in flight). For tools that compare memory with the log (the simulator).
   */
  heldState(id: string): ExecutionState | undefined {
    const run = this.runs.get(id);
    if (!run?.live || run.committedSeq !== run.state.seq) return undefined;
    return structuredClone(run.state);
  }

  async readLog(id: string, options: CallerOptions = {}): Promise<Envelope[]> {
    assertValidId(id);
    await this.authorize(id, options);
    return this.store.read(id);
  }

  /**
   * ADR 0111, smallest form: an execution started with a `principal` is its owner's; resume,
   * send, cancel, fork and reads are refused (UnauthorizedError) unless the caller names it as
   * `as`. One point read of the addressed id's sequence 0 (or memory), before anything else is
   * read, so a refused caller learns nothing of the chain. An id with no log passes here and
   * fails where the operation needs it.
   */
  private async authorize(id: string, options: CallerOptions): Promise<void> {
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

  list(query?: ListQuery): Promise<ExecutionSummary[]> {
    return this.store.list(query);
  }

  /** Re-drives every pending or running execution whose owner is gone (W6). */
  async recoverAbandoned(): Promise<string[]> {
    this.assertOpen();
    const recovered: string[] = [];
    let afterId: string | undefined;
    for (;;) {
      const page = await this.store.list({
        status: ["pending", "running"],
        limit: 200,
        ...(afterId ? { afterId } : {}),
      });
      for (const x of page) {
        if (this.closed) return recovered;
        if (!this.flows.has(x.flow) || this.stuck.has(x.executionId)) continue;
        if (this.options.recoverWhere && !this.options.recoverWhere(x.executionId)) continue;
        if (this.activeRuns() >= this.maxActive) return recovered;
        const run = this.runs.get(x.executionId);
        if (run?.phase === "active") continue;
        if (this.leases.liveElsewhere(await this.store.getLease(x.executionId))) continue;
        const driven = await this.tasks.exclusive(x.executionId, () =>
          this.recoverOne(x.executionId),
        );
        if (driven) recovered.push(x.executionId);
      }
      if (page.length < 200) return recovered;
      afterId = page[page.length - 1]?.executionId;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.loop) clearTimeout(this.loop);
    if (this.noticeLoop) clearInterval(this.noticeLoop);
    this.timers.clear();
    const error = new RuntimeClosedError("the runtime was closed");
    for (const run of [...this.runs.values()]) run.stop(error);
    await this.journal.drain();
    await this.tasks.drain();
    if (this.options.closeStore !== false) await this.store.close();
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
    this.outcomes.set(run.id, outcomeOf(run.state));
    if (this.outcomes.size > RECENT_OUTCOMES) {
      const oldest = this.outcomes.keys().next().value;
      if (oldest !== undefined) this.outcomes.delete(oldest);
    }
  }

  stopped(run: Run, error: Error): void {
    this.forget(run);
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
  private async create(
    flow: Flow,
    id: string,
    payload: { [k: string]: Json },
    accept: (existing: ExecutionState) => void,
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
        const outcome = await this.writeStart(flow, id, payload, fence, claim);
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

  private async writeStart(
    flow: Flow,
    id: string,
    payload: { [k: string]: Json },
    fence: number,
    claimLease: { owner: string; expiresAtMs: number } | undefined,
  ): Promise<"started" | "fenced" | "taken"> {
    const run = new Run(this, flow, initialState(id), fence);
    this.runs.set(id, run);
    try {
      await run.enqueue([{ kind: "EXECUTION_STARTED", payload }], claimLease ? { claimLease } : {});
    } catch (e) {
      this.forget(run);
      if (e instanceof FencedError) return "fenced";
      if (e instanceof SequenceConflictError || e instanceof ExecutionEndedError) return "taken";
      throw e;
    }
    this.begin(run);
    return "started";
  }

  /**
   * Starts a run's body, after K4's check for a successor that has not run a step yet: when its
   * predecessor was cancelled, it cancels itself (reason `{ kind: "cascade", parent }`) instead.
   */
  private begin(run: Run): void {
    const from = run.state._chain?.continuedFrom?.executionId;
    if (from === undefined || Object.keys(run.state.frames).length > 0) {
      run.startBody(makeContext(run, this.contextDeps()));
      return;
    }
    void this.wasCancelled(from).then(
      (cancelled) => {
        if (!run.active) return;
        if (!cancelled) {
          run.startBody(makeContext(run, this.contextDeps()));
          return;
        }
        const reason = { kind: "cascade", parent: from };
        const error = new CancelledError(
          `execution "${run.id}" was cancelled: its predecessor "${from}" was cancelled`,
        );
        run.enqueueDetached(cancelSpecs(run.state, reason, this.clock.now(), error));
      },
      (e: unknown) => run.stop(e instanceof Error ? e : new Error(String(e))),
    );
  }

  /**
   * Appends one piece of external input (a resume, a fired timer) and keeps the execution going:
   * through the cached run when there is one, else under a lease taken here, driving the body
   * if this runtime has its flow.
   */
  private async deliver(
    id: string,
    make: (state: ExecutionState) => EventSpec | readonly EventSpec[] | undefined,
    waitForLease: boolean,
  ): Promise<void> {
    const specsOf = (state: ExecutionState): readonly EventSpec[] => {
      const made = make(state);
      return made === undefined ? [] : "kind" in made ? [made] : made;
    };
    const run = await this.ownedRun(id);
    this.assertOpen();
    if (run) {
      const specs = specsOf(run.state);
      if (specs.length > 0) await run.enqueue(specs);
      else run.maybePark();
      return;
    }
    if ((await this.store.head(id)) < 0) {
      throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
    }
    const lease = waitForLease
      ? await this.leases.acquireWaiting(id)
      : await this.leases.acquireIfDead(id);
    if (!lease) return;
    let handedOver = false;
    try {
      this.assertOpen();
      const state = await mustLoad(this.store, id);
      const specs = specsOf(state);
      if (specs.length > 0) {
        await appendSpecs(this.journal, this.clock, state, lease.fence, specs);
      }
      handedOver = this.drive(state, lease);
    } finally {
      if (!handedOver) await this.leases.release(id, lease.fence);
    }
  }

  /** Hands the chain's waiting messages to `id`'s receives, if it has any waiting (N3). */
  private async deliverMessages(id: string, chainId: string, topic: string): Promise<void> {
    const known = this.runs.get(id)?.state;
    const messages = await this.readInbox(chainId, topic, known ? cursorOf(known, topic) : -1);
    if (messages.length === 0) return;
    await this.deliver(id, (state) => deliverySpecs(state, topic, messages), true);
  }

  /** True when `id`'s log ends in a kernel EXECUTION_CONTINUED (one point read, or memory). */
  private async isContinued(id: string): Promise<boolean> {
    const run = this.runs.get(id);
    if (run) return run.state.status === "continued";
    return (await this.lastEvent(id))?.kind === "EXECUTION_CONTINUED";
  }

  /** True when `id` ended cancelled (K4 (ii)): from memory, or one point read. */
  private async wasCancelled(id: string): Promise<boolean> {
    const run = this.runs.get(id);
    if (run) return run.state.status === "cancelled";
    return (await this.lastEvent(id))?.kind === "EXECUTION_CANCELLED";
  }

  /** The last event of `id`'s log when it is a terminal one (two point reads). */
  private async lastEvent(id: string): Promise<Envelope | undefined> {
    const head = await this.store.head(id);
    if (head < 0) return undefined;
    const last = (await this.store.read(id, head, 1))[0];
    return last && isTerminalEvent(last) ? last : undefined;
  }

  /**
   * The run of `id` this runtime drives, taking the lease back for a cached one (W2). A cached
   * run that another owner drove meanwhile is stopped, so nothing waits on it in vain.
   */
  private async ownedRun(id: string): Promise<Run | undefined> {
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
    const tail = await this.store.read(id, run.state.seq + 1);
    const external = tail.every(
      (e) => e.kind === "RESUMED" || e.kind === "TIMER_FIRED" || e.kind === "MESSAGE_CONSUMED",
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
  private drive(state: ExecutionState, lease: Lease): boolean {
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

  private async recoverOne(id: string): Promise<boolean> {
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

  private async fireTimer(id: string, callId: string): Promise<void> {
    if (this.closed) return;
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

  private async tick(): Promise<void> {
    if (this.ticking || this.closed) return;
    this.ticking = true;
    // Each duty on its own: one that fails (a store error) does not keep the others from running.
    const duties = [
      () => this.fireDueTimers(),
      () => this.fireSchedules(),
      () => this.recoverAbandoned(),
    ];
    try {
      for (const duty of duties) {
        if (this.closed) return;
        await duty().catch((e: unknown) => this.report(e));
      }
    } finally {
      this.ticking = false;
      this.scheduleTick(this.pollIntervalMs);
    }
  }

  private async fireDueTimers(): Promise<void> {
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
  private async takeNotices(): Promise<void> {
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

  private scheduleTick(afterMs: number): void {
    if (this.closed) return;
    if (this.loop) clearTimeout(this.loop);
    this.loop = setTimeout(() => void this.tick(), afterMs);
    this.loop.unref();
  }

  /**
   * An execution this runtime cannot drive with its code (non-determinism, a version it does not
   * accept): remembered so recovery does not retry it in a loop, and reported once, so a worker
   * does not leave it stuck in silence.
   */
  private markStuck(id: string, error: Error): void {
    if (this.stuck.has(id)) return;
    this.stuck.set(id, error);
    this.report(error);
  }

  private activeRuns(): number {
    let n = 0;
    for (const run of this.runs.values()) if (run.active) n++;
    return n;
  }

  private forget(run: Run): void {
    if (this.runs.get(run.id) === run) this.runs.delete(run.id);
    this.cache.remove(run);
  }

  private contextDeps(): ContextDeps {
    return {
      limits: this.limits,
      now: () => this.clock.now(),
      chain: this.chain,
      readInbox: (chainId, topic, afterSeq) => this.readInbox(chainId, topic, afterSeq),
      maxCarryBytes: this.maxCarryBytes,
      rotate: this.chains
        ? (run, carry) => void rotate(this.chainDeps(), run, carry, () => this.journal.drain())
        : undefined,
    };
  }

  private chainDeps(): ChainDeps {
    return {
      store: this.store,
      clock: this.clock,
      maxChainHops: this.maxChainHops,
      flow: (name) => this.flows.get(name),
      startSuccessor: (flow, id, payload, accept) =>
        this.tasks.exclusive(id, () => this.create(flow, id, payload, accept)),
      cancel: (id, reason) => this.cancelOne(id, reason),
      report: (e) => this.report(e),
    };
  }

  report(e: unknown): void {
    const error = e instanceof Error ? e : new Error(String(e));
    if (this.options.onError) this.options.onError(error);
    else if (!(error instanceof RuntimeClosedError)) console.error(`loom: ${error.message}`);
  }

  private assertOpen(): void {
    if (this.closed) throw new RuntimeClosedError("the runtime is closed");
  }
}
