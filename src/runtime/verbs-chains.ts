/**
 * The public verbs that act on a chain, or make a new line of history from one: send to a chain's
 * inbox (inbox.ts N1..N3), follow it to its head, fork an execution (fork.ts V1..V6), restore
 * one from a state or resume it under another flow (restore.ts R1..R6). Each takes the runtime's
 * state (runtime-state.ts); runtime.ts's Runtime hands it in, and keeps the TSDoc users read.
 *
 * Invariants (runtime.ts states them): W3 (what a verb does to one execution runs exclusive on
 * its id), ADR 0111 (each authorizes against the addressed id before any chain read), ADR 0109
 * D2 (an id addresses its chain: what is sent or resumed goes to the chain's live generation).
 */
import { isTerminalStatus } from "../kernel/events.ts";
import {
  ChainHopLimitError,
  ExecutionConflictError,
  ExecutionNotFoundError,
  InvalidInputError,
  LeaseHeldError,
  NotResumableError,
  RuntimeClosedError,
} from "../kernel/errors.ts";
import { boundedJson } from "../kernel/json.ts";
import { assertValidId } from "../kernel/ids.ts";
import { chainOf, type ExecutionState } from "../fold/state.ts";
import { checkedBudget, type Flow } from "./flow.ts";
import { mustLoad } from "./load-state.ts";
import { assertCreatable, checkedPrincipal, startPayload } from "./runtime-support.ts";
import {
  checkedRestore,
  restoredSpec,
  type RestoreOptions,
  type ResumeAsOptions,
} from "./restore.ts";
import type { EventSpec } from "./run.ts";
import { writeFork } from "./fork.ts";
import { checkedName, DEFAULT_TOPIC, type SendOptions } from "./inbox.ts";
import type { CallerOptions, ExecutionHandle, ForkOptions } from "./runtime-options.ts";
import { assertOwner, authorize, create, deliver, deliverMessages, drive } from "./runtime-core.ts";
import { isContinued, refuseIfSucceeded, route } from "./runtime-routing.ts";
import { handle, registered } from "./verbs-executions.ts";
import type { RuntimeState } from "./runtime-state.ts";
import type { ForkLink } from "../store/spi.ts";

/** A chain head's state: held here once its start is committed (a repeat start the store will
 * refuse may be held before, W5), else read. */
async function headState(s: RuntimeState, head: string): Promise<ExecutionState> {
  const held = s.runs.get(head);
  return held && held.committedSeq >= 0 ? held.state : mustLoad(s.store, head);
}

/** Appends `message` to the inbox of the chain `idOrChainId` belongs to (runtime.ts `send`). */
export async function send(
  s: RuntimeState,
  idOrChainId: string,
  message: unknown,
  options: SendOptions = {},
): Promise<{ chainId: string; seq: number }> {
  s.assertOpen();
  assertValidId(idOrChainId);
  if (options === null || typeof options !== "object") {
    throw new InvalidInputError("send options must be an object");
  }
  const topic = checkedName(options.topic, "send topic", DEFAULT_TOPIC);
  const key = checkedName(options.key, "send key", s.ids.newId());
  const payload =
    boundedJson(message, `message for "${idOrChainId}"`, s.limits.maxStepPayloadBytes) ?? null;
  // ADR 0111: authorized against the addressed id before any chain read.
  await authorize(s, idOrChainId, options);
  let head = s.chains ? await route(s, idOrChainId) : idOrChainId;
  let state = await headState(s, head);
  // The head may have rotated between the route and the read: the chain is followed again,
  // and only a head that stays continued (a gap, a successor that fails verification) refuses.
  for (let again = 0; s.chains && state.status === "continued" && again < 2; again++) {
    const next = await route(s, idOrChainId);
    if (next === head) break;
    head = next;
    state = await headState(s, head);
  }
  assertOwner(state._principal, head, options); // a start may have landed since `authorize`
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
  const seq = await s.store.appendMessage(chainId, {
    topic,
    key,
    payload,
    atMs: s.clock.now(),
    ...(state._subject === undefined ? {} : { subject: state._subject }),
  });
  // Waking is best effort (N2): the message is durable, and a receive re-reads before parking.
  // A head that continued meanwhile (the start-to-commit window) hands the wake on to its
  // successor, which may have parked before the message was in the stream.
  for (let hops = 0; ; hops++) {
    const target = head;
    await s.tasks
      .exclusive(target, () => deliverMessages(s, target, chainId, topic))
      .catch((e: unknown) => {
        // A run that began rotating while its inbox was read refuses the delivery (deliver):
        // the message stays in the stream for the successor the loop goes on to.
        if (!(e instanceof LeaseHeldError) && !(e instanceof NotResumableError)) throw e;
      });
    if (!s.chains || hops >= s.maxChainHops) break;
    const rotating = s.runs.get(target)?.rotating === true;
    if (!rotating && !(await isContinued(s, target))) break;
    if (rotating) await s.runs.get(target)?.done.catch(() => undefined);
    head = await route(s, target);
    if (head === target) break;
  }
  return { chainId, seq };
}

/** The newest verified generation of `id`'s chain (runtime.ts `followToHead`, ADR 0109). */
export async function followToHead(
  s: RuntimeState,
  id: string,
  options: CallerOptions = {},
): Promise<string> {
  assertValidId(id);
  await authorize(s, id, options);
  return route(s, id);
}

/** A new execution whose log is a copy of `id`'s prefix (runtime.ts `fork`, fork.ts V1..V6). */
export async function fork(
  s: RuntimeState,
  id: string,
  atSequence: number,
  newId?: string,
  options: ForkOptions = {},
): Promise<ExecutionHandle> {
  s.assertOpen();
  assertValidId(id);
  const target = newId ?? s.ids.newId();
  assertValidId(target);
  assertCreatable(target);
  // V6: a misspelled or bad limit is refused before anything is read or written.
  const budget =
    options.budget === undefined ? undefined : checkedBudget(options.budget, `fork "${target}"`);
  if (options.keepDeadline !== undefined && typeof options.keepDeadline !== "boolean") {
    throw new InvalidInputError("fork option keepDeadline must be true or false");
  }
  const keep = { keepDeadline: options.keepDeadline === true };
  await authorize(s, id, options);
  const deps = {
    store: s.store,
    journal: s.journal,
    clock: s.clock,
    ownerId: s.ownerId,
    leaseTtlMs: s.leaseTtlMs,
  };
  await s.tasks.exclusive(target, async () => {
    const state = await writeFork(deps, id, atSequence, target, budget, keep);
    const lease = {
      executionId: target,
      owner: s.ownerId,
      fence: 1,
      expiresAtMs: s.clock.now() + s.leaseTtlMs,
    };
    if (!drive(s, state, lease)) await s.leases.release(target, 1);
  });
  // The fork has its origin's owner (its copied sequence 0): the caller who forked acts on it.
  return handle(s, target, options.as === undefined ? {} : { as: options.as });
}

/** The most forks `forksOf` answers in one call. */
export const MAX_FORKS_LISTED = 1000;

/**
 * The forks made of `id`, oldest first, each with its fork point (runtime.ts `forksOf`, store
 * S21), at most `options.limit` (100 by default); authorized as `getState` is (ADR 0111): a fork
 * copies its origin's start, so it has its origin's owner.
 */
export async function forksOf(
  s: RuntimeState,
  id: string,
  options: CallerOptions & { limit?: number } = {},
): Promise<ForkLink[]> {
  s.assertOpen();
  assertValidId(id);
  const limit = options.limit ?? 100;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_FORKS_LISTED) {
    throw new InvalidInputError(
      `forksOf: limit must be an integer from 1 to ${MAX_FORKS_LISTED}, got ${String(limit)}`,
    );
  }
  await authorize(s, id, options);
  if ((await s.store.head(id)) < 0) {
    throw new ExecutionNotFoundError(`no execution has the id "${id}"`);
  }
  return s.store.forksOf(id, limit);
}

/** Drives `id` on from a folded `state` (runtime.ts `restoreFromState`, restore.ts R2..R5). */
export async function restoreFromState(
  s: RuntimeState,
  id: string,
  flow: string | Flow,
  state: unknown,
  options: RestoreOptions = {},
): Promise<ExecutionHandle> {
  s.assertOpen();
  assertValidId(id);
  const found = registered(s, flow);
  const record = checkedRestore(state, `state restored onto "${id}"`);
  const principal = checkedPrincipal(options.principal);
  await authorize(s, id, options);
  const spec = restoredSpec(found, record);
  await s.tasks.exclusive(id, async () => {
    if ((await s.store.head(id)) >= 0) return restoreHeld(s, id, () => [spec], options);
    assertCreatable(id);
    const payload = startPayload(found, record.input, {
      budget: found.budget,
      deadlineMs: found.deadlineMs,
    });
    if (principal !== undefined) payload.principal = principal;
    const taken = () => {
      throw new ExecutionConflictError(
        `execution "${id}" was created by another caller during the restore; restore it again`,
        { executionId: id },
      );
    };
    await create(s, found, id, payload, taken, [spec]);
  });
  return handle(s, id, principal === undefined ? options : { as: principal });
}

/** Resumes `id`, routed, under `flow` (runtime.ts `resumeAs`, restore.ts R6). */
export async function resumeAs(
  s: RuntimeState,
  id: string,
  flow: string | Flow,
  payload?: unknown,
  options: ResumeAsOptions = {},
): Promise<void> {
  s.assertOpen();
  assertValidId(id);
  const found = registered(s, flow);
  const json = boundedJson(payload, `resume payload for "${id}"`, s.limits.maxStepPayloadBytes);
  await authorize(s, id, options);
  const target = s.chains ? await route(s, id) : id;
  const resumed: EventSpec = {
    kind: "RESUMED",
    payload: json === undefined ? {} : { payload: json },
  };
  await s.tasks.exclusive(target, () =>
    restoreHeld(
      s,
      target,
      (state) => {
        const mapped = options.transformState
          ? options.transformState(structuredClone(state))
          : state;
        const record = checkedRestore(mapped, `state of "${target}" for flow "${found.name}"`);
        return [restoredSpec(found, record), resumed];
      },
      options,
    ),
  );
}

/**
 * Appends a restore to `id`'s existing log and drives it (R4, R5): a body running here is
 * waited for until it parks or ends, a body held parked here is dropped; the append waits for
 * another owner's lease.
 */
async function restoreHeld(
  s: RuntimeState,
  id: string,
  specs: (state: ExecutionState) => readonly EventSpec[],
  caller: CallerOptions,
): Promise<void> {
  let held = s.runs.get(id);
  if (held?.phase === "active") {
    // A restore replaces a body at rest, never one in the middle of a step.
    const settled = held.done.then(
      () => undefined,
      () => undefined,
    );
    await Promise.race([held.whenParked(), settled]);
    held = s.runs.get(id);
  }
  if (held) {
    s.forget(held);
    held.stop(new RuntimeClosedError(`execution "${id}" was restored; its held body is dropped`));
  }
  await deliver(
    s,
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
    async (state) => {
      assertOwner(state._principal, id, caller); // a start may have landed since `authorize`
      if (s.chains) await refuseIfSucceeded(s, state);
    },
  );
  // Code that could not replay the old record (a version it does not accept) may replay this.
  s.stuck.delete(id);
}
