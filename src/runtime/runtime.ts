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
import { isTerminalStatus } from "../kernel/events.ts";
import type { Envelope } from "../kernel/events.ts";
import {
  ChainHopLimitError,
  ExecutionConflictError,
  ExecutionNotFoundError,
  InvalidInputError,
  InvariantViolation,
  LeaseHeldError,
  NonDeterminismError,
  NotResumableError,
  RuntimeClosedError,
  UnauthorizedError,
  UnknownFlowError,
  WaitTimeoutError,
  isLoomError,
} from "../kernel/errors.ts";
import { boundedJson, type Json } from "../kernel/json.ts";
import { assertValidId } from "../kernel/ids.ts";
import { type ExecutionState } from "../fold/state.ts";
import type { ExecutionSummary, Lease, ListQuery, Schedule } from "../store/spi.ts";
import { CLAIM_BATCH, MAX_CLAIM_SKIP, type FleetMember } from "./fleet.ts";
import { checkedBudget, isFlow, type Flow } from "./flow.ts";
import { endEvent, loadStart, loadState, mustLoad } from "./load-state.ts";
import {
  assertCreatable,
  assertSameStart,
  checkedPrincipal,
  checkedSubject,
  positive,
  startPayload,
  withDeadline,
} from "./runtime-support.ts";
import { routeToHead, startedSuccessor } from "./continuation.ts";
import { compactLog, type Compaction, type CompactOptions } from "./compaction.ts";
import { releaseByPolicy, type RetentionPolicy } from "./retention.ts";
import {
  checkedRestore,
  restoredSpec,
  type RestoreOptions,
  type ResumeAsOptions,
} from "./restore.ts";
import type { EventSpec } from "./run.ts";
import { writeFork } from "./fork.ts";
import { chainOf } from "../fold/state.ts";
import { checkedName, DEFAULT_TOPIC, type SendOptions } from "./inbox.ts";
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
import { outcomeOf, type Outcome } from "./outcome.ts";
import { delay } from "./system.ts";

/** The longest close() waits for background duties in flight. */
const CLOSE_WAIT_MS = 5000;
import { checkedReason } from "./cancel.ts";
import { subscribeDeltas, type LiveDelta } from "../providers/deltas.ts";
import { checkedDuration } from "../kernel/limits.ts";
import { validated } from "../kernel/schema.ts";
import { checkedScheduleName, cronOf, fireSchedules, type ScheduleOptions } from "./schedules.ts";

/** How many addressed ids remember the chain head routing last found for them. */
const KNOWN_HEADS = 1000;

export function createRuntime(options: RuntimeOptions): Runtime {
  return new Runtime(options);
}

import { RuntimeCore } from "./runtime-core.ts";
import { eraseSubject, type Erasure } from "./erase-subject.ts";
import { sealerOf } from "../trust/sealed-store.ts";
import { verifyLog, type RawLog, type VerifyReport } from "../trust/verify.ts";
import { AuditHasher } from "../trust/audit.ts";

export class Runtime extends RuntimeCore {
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
    this.nudge();
    return this;
  }

  /**
   * Starts `flow` with `input` (typed by the flow: a wrong input does not compile, and
   * `result()` resolves to the flow's output type). A flow's input schema is checked first,
   * before anything is recorded (InvalidInputError listing the issues). Starting by name is
   * typed `unknown`.
   */
  start<I, O, In>(
    flow: Flow<I, O, In>,
    ...args: undefined extends In
      ? [input?: NoInfer<In>, options?: StartOptions]
      : [input: NoInfer<In>, options?: StartOptions]
  ): Promise<ExecutionHandle<O>>;
  start(flow: string, input?: unknown, options?: StartOptions): Promise<ExecutionHandle>;
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
    const checked =
      registered.input === undefined
        ? input
        : await validated(registered.input, input, `the input of flow "${name}"`);
    const json = boundedJson(checked, `input of flow "${name}"`, this.limits.maxInputBytes);
    const budget =
      options.budget === undefined
        ? registered.budget
        : checkedBudget(options.budget, `execution "${id}"`);
    const deadlineMs =
      options.deadlineMs === undefined
        ? registered.deadlineMs
        : checkedDuration(options.deadlineMs, `execution "${id}" deadlineMs`);
    const principal = checkedPrincipal(options.principal);
    const subject = checkedSubject(options.subject);
    const payload = startPayload(registered, json, { budget, deadlineMs });
    if (principal !== undefined) payload.principal = principal;
    if (subject !== undefined) payload.subject = subject;
    if (options.drive !== undefined && typeof options.drive !== "boolean") {
      throw new InvalidInputError("start option drive must be true or false");
    }
    await this.tasks.exclusive(id, () =>
      this.create(
        registered,
        id,
        payload,
        (known) => {
          // The owner first: another principal learns nothing of the flow or its input.
          if (known._principal !== principal) {
            throw new UnauthorizedError(
              `execution "${id}" already exists and belongs to another principal`,
              { executionId: id },
            );
          }
          // A repeat start may not change whose data the execution holds (docs/trust.md).
          if (known._subject !== subject) {
            throw new ExecutionConflictError(
              `execution "${id}" already exists with ${known._subject === undefined ? "no data subject" : "another data subject"}`,
              { executionId: id },
            );
          }
          assertSameStart(id, registered.name, json, known.flow, known.input);
        },
        [],
        options.drive !== false,
      ),
    );
    return this.handle(id, principal === undefined ? {} : { as: principal });
  }

  /** A handle on `id`, acting as `caller` (the principal the execution was started with). */
  handle(id: string, caller: CallerOptions = {}): ExecutionHandle {
    return {
      id,
      result: () => this.waitForCompletion(id, caller),
      cancel: (reason) => this.cancel(id, reason, caller),
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
      this.outcome(id, {}).catch(() => undefined),
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
    this.nudge();
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
    return this.cancelRouted(id, why);
  }

  /** Cancels `id`, and with chains on its chain's live generation (authorized by the caller). */
  protected async cancelRouted(id: string, why: Json): Promise<boolean> {
    if (!this.chains) return this.cancelOne(id, why);
    // ADR 0109 D2: a chain member's cancel reaches its live generation. The addressed one is
    // cancelled first (so a successor it starts from now on cancels itself, K4), then every
    // verified successor forward, which covers one started in the start-to-commit window. One
    // whose successor has started is not cancelled: it has handed the chain on (its commit, or
    // recovery's, makes it continued), and the successor may already have ended the chain; the
    // cancel is for the generations from there on.
    const start = await loadStart(this.store, id);
    const handedOn = start && (await startedSuccessor(this.store, start)) !== undefined;
    let cancelled = handedOn ? false : await this.cancelOne(id, why);
    let at = id;
    for (;;) {
      const head = await routeToHead(this.chainDeps(), at);
      if (head === at) {
        // A continued member with no verified successor: the live generation is out of reach.
        if (await this.isContinued(at)) {
          throw new ChainHopLimitError(
            `the chain of "${id}" cannot be followed past "${at}", which continued: its successor is missing or not verified`,
            { from: id, furthest: at },
          );
        }
        return cancelled;
      }
      cancelled = (await this.cancelOne(head, why)) || cancelled;
      at = head;
    }
  }

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
    // Routed whenever chains are on, with the start-to-commit probe: a resume the predecessor
    // took in that window would not reach the successor it already started.
    let target = this.chains ? await this.route(id) : id;
    for (let hops = 0; ; hops++) {
      try {
        return await this.resumeOne(target, json);
      } catch (e) {
        if (!this.chains || !(e instanceof NotResumableError) || hops >= this.maxChainHops) throw e;
        // Continued, or its successor started: route onward (the probe finds it), once a
        // rotation held here has committed (in its start-to-commit window routing lands here).
        const held = this.runs.get(target);
        if (held?.rotating) await held.done.catch(() => undefined);
        const next = await this.route(target);
        if (next === target) throw e;
        target = next;
      }
    }
  }

  /**
   * Drives `id` on from `state`, a folded state as `getState` gives it (moved from another store,
   * repaired by hand): its frames, call order, decisions, queued resume payloads and input replace
   * the execution's, as a STATE_RESTORED fact in its log, and `flow` drives it from then on. What
   * it has spent, its owner, its chain and its deadline stay the log's (fold/restored.ts R2). An
   * id with no log is created (restore.ts R3..R5).
   */
  async restoreFromState(
    id: string,
    flow: string | Flow,
    state: unknown,
    options: RestoreOptions = {},
  ): Promise<ExecutionHandle> {
    this.assertOpen();
    assertValidId(id);
    const registered = this.registered(flow);
    const record = checkedRestore(state, `state restored onto "${id}"`);
    const principal = checkedPrincipal(options.principal);
    await this.authorize(id, options);
    const spec = restoredSpec(registered, record);
    await this.tasks.exclusive(id, async () => {
      if ((await this.store.head(id)) >= 0) return this.restoreHeld(id, () => [spec]);
      assertCreatable(id);
      const payload = startPayload(registered, record.input, {
        budget: registered.budget,
        deadlineMs: registered.deadlineMs,
      });
      if (principal !== undefined) payload.principal = principal;
      const taken = () => {
        throw new ExecutionConflictError(
          `execution "${id}" was created by another caller during the restore; restore it again`,
          { executionId: id },
        );
      };
      await this.create(registered, id, payload, taken, [spec]);
    });
    return this.handle(id, principal === undefined ? options : { as: principal });
  }

  /**
   * Resumes `id` (routed to its chain's head, as `resume`) under `flow`, a new version of its
   * flow or another one, with its state mapped by `options.transformState` when given: the
   * restore and the resume are one batch (restore.ts R6).
   */
  async resumeAs(
    id: string,
    flow: string | Flow,
    payload?: unknown,
    options: ResumeAsOptions = {},
  ): Promise<void> {
    this.assertOpen();
    assertValidId(id);
    const registered = this.registered(flow);
    const json = boundedJson(
      payload,
      `resume payload for "${id}"`,
      this.limits.maxStepPayloadBytes,
    );
    await this.authorize(id, options);
    const target = this.chains ? await this.route(id) : id;
    const resumed: EventSpec = {
      kind: "RESUMED",
      payload: json === undefined ? {} : { payload: json },
    };
    await this.tasks.exclusive(target, () =>
      this.restoreHeld(target, (state) => {
        const mapped = options.transformState
          ? options.transformState(structuredClone(state))
          : state;
        const record = checkedRestore(mapped, `state of "${target}" for flow "${registered.name}"`);
        return [restoredSpec(registered, record), resumed];
      }),
    );
  }

  /** The registered flow `flow` names (registering it when it is one). */
  private registered(flow: string | Flow): Flow {
    if (isFlow(flow)) this.registerFlow(flow);
    const name = isFlow(flow) ? flow.name : flow;
    const registered = this.flows.get(name);
    if (!registered) {
      throw new UnknownFlowError(`no flow named ${JSON.stringify(name)} is registered`);
    }
    return registered;
  }

  /**
   * Appends a restore to `id`'s existing log and drives it (R4, R5): a body running here is
   * waited for until it parks or ends, a body held parked here is dropped; the append waits for
   * another owner's lease.
   */
  private async restoreHeld(
    id: string,
    specs: (state: ExecutionState) => readonly EventSpec[],
  ): Promise<void> {
    let held = this.runs.get(id);
    if (held?.phase === "active") {
      // A restore replaces a body at rest, never one in the middle of a step.
      const settled = held.done.then(
        () => undefined,
        () => undefined,
      );
      await Promise.race([held.whenParked(), settled]);
      held = this.runs.get(id);
    }
    if (held) {
      this.forget(held);
      held.stop(new RuntimeClosedError(`execution "${id}" was restored; its held body is dropped`));
    }
    await this.deliver(
      id,
      (state) => {
        if (isTerminalStatus(state.status)) {
          throw new NotResumableError(
            `execution "${id}" has ended (${state.status}) and cannot be restored`,
          );
        }
        return specs(state);
      },
      true,
      this.chains ? (state) => this.refuseIfSucceeded(state) : undefined,
    );
    // Code that could not replay the old record (a version it does not accept) may replay this.
    this.stuck.delete(id);
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
    let head = this.chains ? await this.route(idOrChainId) : idOrChainId;
    const state = this.runs.get(head)?.state ?? (await mustLoad(this.store, head));
    if (state.status === "continued") {
      // Routing stopped at a continued member: its successor is missing (a gap) or failed
      // verification. Refused, with nothing appended (ADR 0109 residual 0, fix round 3 (3)).
      throw new ChainHopLimitError(
        `the chain of "${idOrChainId}" cannot be followed past "${head}", which continued: its successor is missing or not verified`,
        { from: idOrChainId, furthest: head },
      );
    }
    if (isTerminalStatus(state.status)) {
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
      ...(state._subject === undefined ? {} : { subject: state._subject }),
    });
    // Waking is best effort (N2): the message is durable, and a receive re-reads before parking.
    // A head that continued meanwhile (the start-to-commit window) hands the wake on to its
    // successor, which may have parked before the message was in the stream.
    for (let hops = 0; ; hops++) {
      const target = head;
      await this.tasks
        .exclusive(target, () => this.deliverMessages(target, chainId, topic))
        .catch((e: unknown) => {
          if (!(e instanceof LeaseHeldError)) throw e;
        });
      if (!this.chains || hops >= this.maxChainHops) break;
      const rotating = this.runs.get(target)?.rotating === true;
      if (!rotating && !(await this.isContinued(target))) break;
      if (rotating) await this.runs.get(target)?.done.catch(() => undefined);
      head = await this.route(target);
      if (head === target) break;
    }
    return { chainId, seq };
  }

  /**
   * The id of the newest verified generation of the chain `id` belongs to (ADR 0109: routed,
   * O(log n) point reads): `id` itself for an execution that never continued.
   */
  async followToHead(id: string, options: CallerOptions = {}): Promise<string> {
    assertValidId(id);
    await this.authorize(id, options);
    return this.route(id);
  }

  /** What routing reads with, made once: `chainDeps()` makes five closures, and every resume routes. */
  private readonly routing = { store: this.store, maxChainHops: this.maxChainHops };

  /**
   * followToHead for a caller already authorized against `id`: routing follows only successors
   * with the same owner (K5), so the head needs no second check.
   */
  private async route(id: string): Promise<string> {
    // Routing from the head last found for this id costs a probe, not the chain's walk.
    let known = this.knownHeads.get(id);
    // A head this runtime holds live and not rotating is still the head: a successor is started
    // only by the run that holds it, and a run another owner drove meanwhile is caught (and
    // dropped) when this one takes its lease back (ownedRun), so the caller routes again then.
    const held = known === undefined ? undefined : this.runs.get(known);
    if (held?.live && !held.rotating && !isTerminalStatus(held.state.status)) {
      // An owned chain is reached through a remembered head only while the addressed id has a
      // log (retention may have released it: its caller was authorized against no owner).
      if (held.state._principal === undefined || (await this.store.head(id)) >= 0) {
        return held.id;
      }
    }
    // Only while the addressed id has a log: once retention released it, a caller authorized
    // against no owner must not reach the chain through this memory.
    if (known !== undefined && known !== id && (await this.store.head(id)) < 0) {
      this.knownHeads.delete(id);
      known = undefined;
    }
    const head = await routeToHead(this.routing, known ?? id).catch((e: unknown) => {
      // The remembered head may be gone (retention): route from the addressed id itself.
      if (known === undefined) throw e;
      return routeToHead(this.routing, id);
    });
    this.knownHeads.delete(id);
    this.knownHeads.set(id, head);
    if (this.knownHeads.size > KNOWN_HEADS) {
      const oldest = this.knownHeads.keys().next().value;
      if (oldest !== undefined) this.knownHeads.delete(oldest);
    }
    return head;
  }

  async waitForCompletion(
    id: string,
    options: { timeoutMs?: number } & CallerOptions = {},
  ): Promise<Outcome> {
    assertValidId(id);
    await this.authorize(id, options);
    return this.outcome(id, options);
  }

  /** Waits for `id`'s outcome (authorized by the caller of this method). */
  private async outcome(id: string, options: { timeoutMs?: number }): Promise<Outcome> {
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
      if (await endEvent(this.store, id)) return outcomeOf(await mustLoad(this.store, id));
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
   * Checks the audit chain of `id` as stored (trust/verify.ts K1..K5): every hash, every link,
   * density, and a successor's link to its predecessor. `ok: false` names the first bad sequence
   * number. Needs a log written with `audit` on (and the same key, for a keyed audit).
   */
  async verifyLog(id: string, options: CallerOptions = {}): Promise<VerifyReport> {
    assertValidId(id);
    await this.authorize(id, options);
    const sealer = sealerOf(this.store);
    if (!sealer) throw new InvariantViolation("the runtime's store is not a sealing store");
    const raw: RawLog = {
      readRaw: (i, from, limit) => sealer.readRaw(i, from, limit),
      head: (i) => this.store.head(i),
      snapshotSeq: async (i) => (await sealer.inner.loadSnapshot(i))?.seq,
      readStart: async (i) => (await this.store.read(i, 0, 1))[0],
    };
    return verifyLog(raw, sealer.auditHasher ?? new AuditHasher(true), id);
  }

  /**
   * Makes every payload of data subject `subject` unrecoverable (docs/trust.md): cancels its live
   * executions, records SUBJECT_ERASED in each of its logs, then destroys its key
   * (erase-subject.ts X1..X4). Logs keep their shape, still fold, and still verify.
   */
  async eraseSubject(subject: string): Promise<Erasure> {
    this.assertOpen();
    const checked = checkedSubject(subject) as string;
    return eraseSubject(
      {
        store: this.store,
        journal: this.journal,
        clock: this.clock,
        leases: this.leases,
        ownerId: this.ownerId,
        cancelOne: (id, why) => this.cancelOne(id, why),
      },
      checked,
    );
  }

  list(query?: ListQuery): Promise<ExecutionSummary[]> {
    return this.store.list(query);
  }

  /**
   * Deletes the events of `id` that its latest snapshot covers, except the pinned kinds
   * (EXECUTION_STARTED, the terminal kinds, QUOTA_EXCEEDED, STATE_RESTORED) and `options.keepKinds`; see
   * compaction.ts. Sequence numbers stay: `readLog` returns a log with a gap.
   */
  async compact(id: string, options: CompactOptions = {}): Promise<Compaction> {
    this.assertOpen();
    assertValidId(id);
    await this.authorize(id, options);
    return compactLog(this.store, id, options);
  }

  /**
   * Deletes the terminal executions `policy` names (`continued` included by default), except
   * the generations chain routing still needs; returns the ids released. See retention.ts.
   */
  async applyRetention(policy: RetentionPolicy): Promise<string[]> {
    this.assertOpen();
    const deps = { store: this.store, clock: this.clock, maxChainHops: this.maxChainHops };
    const released = await releaseByPolicy(deps, policy);
    for (const id of released) {
      this.knownHeads.delete(id);
      this.outcomes.delete(id);
    }
    return released;
  }

  /** Re-drives every pending or running execution whose owner is gone (W6). */
  async recoverAbandoned(): Promise<string[]> {
    this.assertOpen();
    if (this.fleet && !this.options.recoverWhere) return this.claimRunnable(this.fleet);
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

  /** L1: recovery in a fleet, by claims; drives each claimed execution it has room for. */
  private async claimRunnable(fleet: FleetMember): Promise<string[]> {
    const recovered: string[] = [];
    // Executions this member claims but cannot drive (stuck here, a version it does not accept)
    // come back first at every claim (claims go in id order): it claims past them, a bounded
    // number, and stops when a claim drives nothing new.
    let skip = 0;
    for (;;) {
      const room = this.maxActive - this.activeRuns();
      // No room (maxActive), or nothing to drive: the rest is other members' (L1).
      if (room <= 0 || this.flows.size === 0) return recovered;
      const limit = Math.min(CLAIM_BATCH, room) + skip;
      const leases = await fleet.claim([...this.flows.keys()], limit);
      let driven = 0;
      for (const lease of leases) {
        const id = lease.executionId;
        const ok = await this.tasks
          .exclusive(id, () => this.driveClaimed(id, lease))
          .catch((e: unknown) => {
            this.report(e);
            return false;
          });
        if (ok) {
          driven++;
          recovered.push(id);
        }
      }
      if (this.closed || leases.length < limit) return recovered;
      const undriven = leases.length - driven;
      if ((driven === 0 && undriven <= skip) || undriven > MAX_CLAIM_SKIP) return recovered;
      skip = undriven;
    }
  }

  /** Drives an execution whose lease a claim took here; gives the lease back if it cannot. */
  private async driveClaimed(id: string, lease: Lease): Promise<boolean> {
    let driven = false;
    try {
      const cached = this.runs.get(id);
      if (cached?.phase === "parked") {
        // Parked here, then resumed elsewhere: taken back as recovery does (ownedRun checks what
        // moved since it parked), under a lease of its own.
        await this.leases.release(id, lease.fence);
        driven = true;
        const run = await this.ownedRun(id);
        run?.maybePark();
        return run !== undefined;
      }
      if (this.closed || this.stuck.has(id) || cached?.live) return false;
      const state = await loadState(this.store, id);
      driven = state !== undefined && this.drive(state, lease);
      return driven;
    } finally {
      if (!driven) await this.leases.release(id, lease.fence);
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
    if (this.options.closeStore !== false) await this.store.close();
  }
}
