/**
 * The core every verb goes through: who may act on an execution (authorize), and how one comes
 * to be driven here: created (sequence 0), delivered to (one piece of external input), taken
 * back from the parked cache, driven, recovered. Functions of the runtime's state
 * (runtime-state.ts), which the verbs above call.
 *
 * Invariants (runtime.ts states them): W1 (drive: one Run per execution, under the lease its
 * appends carry), W2 (ownedRun: a cached run's tail is checked before it is driven again), W4
 * (create: a refusal is raised before any append), W5 (create: a caller-chosen id adopts the
 * existing execution it names), ADR 0111 (authorize: before anything else is read).
 */
import {
  CancelledError,
  ExecutionEndedError,
  ExecutionNotFoundError,
  FencedError,
  FlowVersionError,
  InvalidInputError,
  LeaseHeldError,
  NotResumableError,
  SequenceConflictError,
  UnauthorizedError,
} from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { settledCount } from "../fold/settled.ts";
import { chainOf, initialState, type ExecutionState } from "../fold/state.ts";
import type { InboxMessage, Lease } from "../store/spi.ts";
import { makeContext } from "./context.ts";
import type { Flow } from "./flow.ts";
import { appendSpecs, approxStateBytes, loadStart, loadState, mustLoad } from "./load-state.ts";
import { startedSuccessor } from "./chain-routing.ts";
import { cursorOf, deliverySpecs } from "./inbox.ts";
import type { CallerOptions } from "./runtime-options.ts";
import { Run, type EventSpec } from "./run.ts";
import { delay } from "./system.ts";
import { cancelSpecs } from "./cancel-specs.ts";
import { wasCancelled } from "./runtime-routing.ts";
import type { RuntimeState } from "./runtime-state.ts";

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

/**
 * ADR 0111, smallest form: an execution started with a `principal` is its owner's; resume,
 * send, cancel, fork and reads are refused (UnauthorizedError) unless the caller names it as
 * `as`. One point read of the addressed id's sequence 0 (or memory), before anything else is
 * read, so a refused caller learns nothing of the chain. An id with no log passes here and
 * fails where the operation needs it.
 */
export async function authorize(
  s: RuntimeState,
  id: string,
  options: CallerOptions,
): Promise<void> {
  if (options === null || typeof options !== "object") {
    throw new InvalidInputError("caller options must be an object");
  }
  // A start not yet committed names no owner while the log may hold another's: a repeat start
  // writes before it reads (W5), and the store may refuse it. The log decides; failing that,
  // the start in flight.
  const run = s.runs.get(id);
  const held = run !== undefined && run.committedSeq >= 0 ? run.state : undefined;
  const owner = (held ?? (await loadStart(s.store, id)) ?? run?.state)?._principal;
  assertOwner(owner, id, options);
}

/**
 * ADR 0111, checked again on the state a verb appends to: `authorize` ran before the verb's
 * exclusive section, when the id may have had no log yet, and a start by its owner could land
 * in between. Sequence 0 names the owner for good, so a check on the loaded state is final.
 */
export function assertOwner(owner: string | undefined, id: string, options: CallerOptions): void {
  if (owner === undefined || owner === options.as) return;
  throw new UnauthorizedError(
    `${options.as === undefined ? "an anonymous caller" : `principal ${JSON.stringify(options.as)}`} may not act on execution "${id}": it belongs to another principal`,
    { executionId: id },
  );
}

/**
 * Writes sequence 0. The first try claims the lease in the same transaction (fence 1, no lease
 * row yet) without reading first: on a fresh id it is the only store call, and the store refuses
 * it, writing nothing, when the id has a log or a lease row (S9, A1). Then the log is read: a
 * start found there is adopted (W5); when a lease row exists without one (a creator that
 * crashed, a concurrent start) the lease is taken first.
 */
export async function create(
  s: RuntimeState,
  flow: Flow,
  id: string,
  payload: { [k: string]: Json },
  accept: (existing: ExecutionState) => void,
  /** Appended with sequence 0, in its batch (a restore's STATE_RESTORED). */
  extra: readonly EventSpec[] = [],
  /** Drive it here (else its lease is released at once, for a worker to claim). */
  drive = true,
): Promise<void> {
  const giveUpAt = s.clock.now() + s.leaseTtlMs * 2;
  let fence: number | undefined = 1;
  for (let tries = 0; ; tries++) {
    const held = s.runs.get(id)?.state;
    if (held) return accept(held);
    const known = tries === 0 ? undefined : await loadStart(s.store, id);
    if (known) return accept(known);
    fence ??= (await s.leases.acquireIfDead(id))?.fence;
    if (fence !== undefined) {
      const claim =
        fence === 1 ? { owner: s.ownerId, expiresAtMs: s.clock.now() + s.leaseTtlMs } : undefined;
      const outcome = await writeStart(s, flow, id, payload, fence, claim, extra, drive);
      if (outcome === "started") return;
      fence = undefined;
      if (outcome === "fenced") continue;
    }
    if (s.clock.now() > giveUpAt) {
      throw new LeaseHeldError(`execution "${id}" is being created by another owner; try again`);
    }
    await delay(25);
  }
}

async function writeStart(
  s: RuntimeState,
  flow: Flow,
  id: string,
  payload: { [k: string]: Json },
  fence: number,
  claimLease: { owner: string; expiresAtMs: number } | undefined,
  extra: readonly EventSpec[],
  drive: boolean,
): Promise<"started" | "fenced" | "taken"> {
  const run = new Run(s, flow, initialState(id), fence);
  s.runs.set(id, run);
  try {
    const specs: EventSpec[] = [{ kind: "EXECUTION_STARTED", payload }, ...extra];
    // Not driven here: the lease goes back in the same transaction (a worker claims it).
    const release = drive ? {} : { release: true as const };
    await run.enqueue(specs, claimLease ? { claimLease, ...release } : release);
  } catch (e) {
    s.forget(run);
    if (e instanceof FencedError) return "fenced";
    if (e instanceof SequenceConflictError || e instanceof ExecutionEndedError) return "taken";
    throw e;
  }
  if (!drive) {
    // Recorded, not driven: its batch released the lease, and a worker claims the execution.
    s.forget(run);
    return "started";
  }
  begin(s, run, true);
  return "started";
}

/**
 * Starts a run's body, after K4's check for a successor that has not run a step yet: when its
 * predecessor was cancelled, it cancels itself (reason `{ kind: "cascade", parent }`) instead.
 */
function begin(s: RuntimeState, run: Run, created = false): void {
  const from = run.state._chain?.continuedFrom?.executionId;
  const fresh =
    from !== undefined &&
    Object.keys(run.state.frames).length === 0 &&
    settledCount(run.state._settled) === 0;
  // A brand-new execution has no successor to find: only a re-driven one is probed.
  if ((!s.chains || created) && !fresh) {
    run.startBody(makeContext(run, s.contextDeps));
    return;
  }
  void beginChained(s, run, fresh ? from : undefined, !created).catch((e: unknown) =>
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
async function beginChained(
  s: RuntimeState,
  run: Run,
  predecessor: string | undefined,
  probe: boolean,
): Promise<void> {
  if (s.chains && probe) {
    const successorId = await startedSuccessor(s.store, run.state);
    if (!run.active) return;
    if (successorId !== undefined) {
      const chain = chainOf(run.state);
      run.rotating = true;
      const payload = { successorId, chainId: chain.chainId, generation: chain.generation + 1 };
      await run.enqueue([{ kind: "EXECUTION_CONTINUED", payload, kernel: true }]);
      return;
    }
  }
  if (predecessor !== undefined && (await wasCancelled(s, predecessor))) {
    if (!run.active) return;
    const reason = { kind: "cascade", parent: predecessor };
    const error = new CancelledError(
      `execution "${run.id}" was cancelled: its predecessor "${predecessor}" was cancelled`,
    );
    run.enqueueDetached(cancelSpecs(run.state, reason, s.clock.now(), error));
    return;
  }
  if (run.active) run.startBody(makeContext(run, s.contextDeps));
}

/**
 * Appends one piece of external input (a resume, a fired timer) and keeps the execution going:
 * through the cached run when there is one, else under a lease taken here, driving the body
 * if this runtime has its flow.
 */
export async function deliver(
  s: RuntimeState,
  id: string,
  make: (state: ExecutionState) => EventSpec | readonly EventSpec[] | undefined,
  waitForLease: boolean,
  /** Checked (and may throw) once the state to append to is known, just before `make`. */
  check?: (state: ExecutionState) => Promise<void>,
): Promise<boolean> {
  const run = await ownedRun(s, id);
  s.assertOpen();
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
  if ((await s.store.head(id)) < 0) {
    throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
  }
  const lease = waitForLease ? await s.leases.acquireWaiting(id) : await s.leases.acquireIfDead(id);
  // Another live owner holds it: it was not delivered (false), and the caller may try again.
  if (!lease) return false;
  let handedOver = false;
  try {
    s.assertOpen();
    const state = await mustLoad(s.store, id);
    await check?.(state);
    const specs = specsOf(make, state);
    if (specs.length > 0) {
      // load-state.ts L3: input that wakes no body still gets the snapshot policy a run keeps.
      await appendSpecs(s.journal, s.clock, state, lease.fence, specs, {}, s.snapshotEvery);
    }
    handedOver = drive(s, state, lease);
  } finally {
    if (!handedOver) await s.leases.release(id, lease.fence);
  }
  return true;
}

/** Hands the chain's waiting messages to `id`'s receives, if it has any waiting (N3). */
export async function deliverMessages(
  s: RuntimeState,
  id: string,
  chainId: string,
  topic: string,
): Promise<void> {
  const known = s.runs.get(id)?.state;
  if (known === undefined) {
    // A state read back for the delivery: the messages are those past its own cursor, not the
    // stream's first batch (a receive loop past READ_BATCH messages got none of them, ever).
    let unread: readonly InboxMessage[] = [];
    const readPast = async (state: ExecutionState) => {
      unread = await s.readInbox(chainId, topic, cursorOf(state, topic));
    };
    await deliver(s, id, (state) => deliverySpecs(state, topic, unread), true, readPast);
    return;
  }
  const messages = await s.readInbox(chainId, topic, cursorOf(known, topic));
  if (messages.length === 0) return;
  await deliver(s, id, (state) => deliverySpecs(state, topic, messages), true);
}

/**
 * The run of `id` this runtime drives, taking the lease back for a cached one (W2). A cached
 * run that another owner drove meanwhile is stopped, so nothing waits on it in vain.
 */
export async function ownedRun(s: RuntimeState, id: string): Promise<Run | undefined> {
  const run = s.runs.get(id);
  if (!run?.live) return undefined;
  if (run.phase === "active") return run;
  s.cache.remove(run);
  const lease = await s.leases.acquire(id);
  const stale = () =>
    run.stop(
      new FencedError(`execution "${id}" was driven by another owner; the cached body is dropped`),
    );
  if (!lease) {
    stale();
    return undefined;
  }
  const from = run.state.seq + 1;
  // Every acquire moves the fence (S6) and every append needs the lease (S3): a fence one past
  // the parked run's means no other owner held it since, so nothing was appended meanwhile.
  run.untouched = lease.fence === run.fence + 1;
  const tail = run.untouched ? [] : await s.store.read(id, from);
  // A gap in the tail (another owner drove it, then it was compacted) is not external input.
  const external = tail.every(
    (e, i) =>
      e.seq === from + i &&
      (e.kind === "RESUMED" || e.kind === "TIMER_FIRED" || e.kind === "MESSAGE_CONSUMED"),
  );
  if (s.closed || !external || !run.reactivate(lease.fence)) {
    if (!external) stale();
    await s.leases.release(id, lease.fence);
    return undefined;
  }
  run.absorbCommitted(tail);
  return run.active ? run : undefined;
}

/** Starts a Run over `state` when this runtime can drive it; false when it cannot. */
export function drive(s: RuntimeState, state: ExecutionState, lease: Lease): boolean {
  if (s.closed || (state.status !== "running" && state.status !== "pending")) return false;
  const flow = s.flows.get(state.flow);
  if (!flow) return false;
  if (state.flowVersion !== flow.version && !flow.compatibleVersions.includes(state.flowVersion)) {
    s.markStuck(
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
  const run = new Run(s, flow, state, lease.fence);
  run.approxBytes = approxStateBytes(state);
  s.runs.set(state.executionId, run);
  begin(s, run);
  return true;
}

/** Drives `id` when its owner is gone (W6), or takes back a run parked here. */
export async function recoverOne(s: RuntimeState, id: string): Promise<boolean> {
  const cached = s.runs.get(id);
  if (cached?.phase === "parked") {
    const run = await ownedRun(s, id);
    run?.maybePark();
    return run !== undefined;
  }
  if (cached?.live) return false;
  const lease = await s.leases.acquireIfDead(id);
  if (!lease) return false;
  let driven = false;
  try {
    const state = await loadState(s.store, id);
    driven = state !== undefined && drive(s, state, lease);
    return driven;
  } finally {
    // A log that cannot be read (LogCorruptError) gives its lease back too.
    if (!driven) await s.leases.release(id, lease.fence);
  }
}
