/**
 * The pure fold: state = fold(state, envelope).
 *
 * Invariants (tests cite F1..F6):
 * F1. Deterministic: the same log gives the same state, byte for byte; no clock, no randomness.
 * F2. Never throws: a malformed envelope or payload is ignored, the same way every time.
 * F3. Terminal kinds fold only from kernel-stamped envelopes (`meta.kernel: true`).
 * F4. Nothing folds after a terminal event but a kernel-stamped SUBJECT_ERASED (schema 1.8.0),
 *     which records an erasure in `_erased` and changes nothing else.
 * F5. foldAll(log) equals foldAll(tail, snapshot) for any snapshot of a prefix of log.
 * F6. Sequence 0 must be EXECUTION_STARTED, and only sequence 0 may be: a log whose first event
 *     is not is ignored whole, and a later EXECUTION_STARTED is ignored.
 * F7. Status: terminal after a terminal event; else `parked` while a wait (sleep or suspend, in
 *     any scope) is open and no step is in flight; else `running` (`pending` before any call).
 *
 * `fold` updates `state` in place and returns it: the caller owns the state it passes in
 * (`foldAll` copies a snapshot before folding onto it).
 */
import { isTerminalEvent, isTerminalStatus, type Envelope } from "../kernel/events.ts";
import { isPlainObject, type Json } from "../kernel/json.ts";
import { SCALAR_DIMENSIONS, addResources, isDimension, readBudget } from "../kernel/resources.ts";
import { initialState, type ExecutionState, type Frame, type Snapshot } from "./state.ts";
import { DEDUPE_WINDOW, readCarried, readChain, type ChainIdentity } from "../kernel/chain.ts";
import { applyRestored, readRestored } from "./restored.ts";
import { AWAIT_CHILD, awaitChild, childDone, startChild } from "./children.ts";
import { readParent } from "../kernel/children.ts";
import {
  callHead,
  errorOf,
  frameOf,
  record,
  safeKey,
  settleWait,
  str,
  type Payload,
} from "./frames.ts";

export function fold(state: ExecutionState, envelope: Envelope): ExecutionState {
  const e = envelope as unknown;
  if (!isPlainObject(e)) return state;
  const { seq, kind, at, payload } = e as unknown as Envelope;
  if (!Number.isSafeInteger(seq) || seq !== state.seq + 1) return state;
  if (typeof at !== "number" || !Number.isFinite(at)) return state;
  if (seq === 0 && kind !== "EXECUTION_STARTED") return state;
  if (state.seq >= 0 && (e as unknown as Envelope).executionId !== state.executionId) return state;
  const erasure = kind === "SUBJECT_ERASED" && (e as unknown as Envelope).meta?.kernel === true;
  if (state.seq >= 0 && isTerminal(state) && !erasure) return state;
  const p: Payload = isPlainObject(payload) ? payload : {};
  const restart = seq > 0 && kind === "EXECUTION_STARTED";
  const handler = !restart && Object.hasOwn(HANDLERS, kind) ? HANDLERS[kind] : undefined;
  state.seq = seq;
  state.updatedAt = at;
  if (handler) handler(state, p, e as unknown as Envelope);
  if (!isTerminal(state) && kind !== "EXECUTION_STARTED" && !erasure) {
    state.status = state.openWaits > 0 && state.inFlight === 0 ? "parked" : "running";
  }
  return state;
}

export function foldAll(events: Iterable<Envelope>, from?: Snapshot): ExecutionState {
  let state: ExecutionState | undefined = from
    ? (JSON.parse(JSON.stringify(from.state)) as ExecutionState)
    : undefined;
  for (const e of events) {
    if (!state) {
      const id = isPlainObject(e) ? (e as { executionId?: unknown }).executionId : "";
      state = initialState(typeof id === "string" ? id : "");
    }
    fold(state, e);
  }
  return state ?? initialState(from?.state.executionId ?? "");
}

function isTerminal(s: ExecutionState): boolean {
  return isTerminalStatus(s.status);
}

/**
 * Settles a step. A step that settled before its start was written (a fast step: schema 1.1.0)
 * records its start in the settling event itself (`scope`, `name`, `input`, `startedAt`), and
 * the frame is made from it, never counted in flight.
 */
function settleStep(s: ExecutionState, p: Payload, e: Envelope, apply: (f: Frame) => void): void {
  const f = frameOf(s, p.callId);
  if (!f) {
    const head = callHead(p);
    if (!head) return;
    const made: Frame = {
      kind: "step",
      ...head,
      status: "started",
      firstStartedAt: startedAt(p, e),
      attempts: 1,
    };
    if (p.input !== undefined) made.input = p.input;
    apply(made);
    s.frames[head.callId] = made;
    record(s, head.scope, `step:${head.callId}`);
    return;
  }
  if (f.kind !== "step" || f.status !== "started") return;
  delete f.retryAtMs;
  delete f.attemptStartedAt;
  apply(f);
  s.inFlight--;
}

/** Opens a step's frame from its start (a STEP_STARTED, or a first failed attempt). */
function openStep(s: ExecutionState, p: Payload, e: Envelope): Frame | undefined {
  const head = callHead(p);
  if (!head) return undefined;
  const f: Frame = {
    kind: "step",
    ...head,
    status: "started",
    firstStartedAt: startedAt(p, e),
    attempts: 1,
  };
  if (p.input !== undefined) f.input = p.input;
  s.frames[head.callId] = f;
  record(s, head.scope, `step:${head.callId}`);
  s.inFlight++;
  return f;
}

/** When a step started: its recorded `startedAt` (schema 1.1.0), else the envelope's time. */
function startedAt(p: Payload, e: Envelope): number {
  return typeof p.startedAt === "number" && Number.isFinite(p.startedAt) ? p.startedAt : e.at;
}

/** The decision name of ctx.negotiateBudget (ADR 0032 R2). */
export const NEGOTIATE = "$negotiate";

/** A negotiated grant sets the budget's limit in its dimension (schema 1.2.0). */
function applyGrant(s: ExecutionState, value: Json): void {
  if (!isPlainObject(value) || !str(value.dimension)) return;
  const limit = value.limit;
  if (typeof limit !== "number" || !Number.isFinite(limit) || limit < 0) return;
  const dimension = value.dimension;
  if (!isDimension(dimension)) return;
  const budget = { ...s._budget };
  if (dimension.startsWith("custom.")) {
    budget.custom = { ...budget.custom, [dimension.slice("custom.".length)]: limit };
  } else {
    budget[dimension as "tokens" | (typeof SCALAR_DIMENSIONS)[number]] = limit;
  }
  s._budget = budget;
}

/** The name of `ctx.receive` calls (a SUSPENDED with it is a receive's wait). */
export const RECEIVE = "receive";

function topicOf(v: Json | undefined): string | undefined {
  return str(v) && safeKey(v) && v.length <= 200 ? v : undefined;
}

/**
 * A successor's sequence 0 (schema 1.5.0): what it carried from its predecessor seeds its
 * state, so replay needs no runtime help (ADR 0109 D3), and the chain's deadline caps its own.
 */
/** A copy of plain JSON records (the fold changes `_children` in place; `_chain` must not). */
function structuredCloneJson<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

function seedFromChain(s: ExecutionState, chain: ChainIdentity, at: number): void {
  s._chain = chain;
  const carried = chain.continuedFrom?.carried ?? {};
  if (carried.resources) s._resources = carried.resources;
  if (carried.scopeResources) s._scopeResources = { ...carried.scopeResources };
  if (carried.children) s._children = structuredCloneJson(carried.children);
  if (carried.quotaExceeded) s._quotaExceeded = carried.quotaExceeded;
  // A copy: the fold changes _inbox in place, and _chain must keep what sequence 0 recorded.
  if (carried.inbox) {
    s._inbox = { cursors: { ...carried.inbox.cursors }, dedupe: [...carried.inbox.dedupe] };
  }
  if (carried.resumePayloads) s._resumePayloads = [...carried.resumePayloads];
  if (carried.chainDeadline !== undefined) {
    const left = Math.max(0, carried.chainDeadline - at);
    s.deadlineMs = s.deadlineMs === undefined ? left : Math.min(s.deadlineMs, left);
  }
}

/** A fork's chain stamp (`meta.forkChain`), valid only as the fork's own generation 0. */
function forkChainOf(e: Envelope): ChainIdentity | undefined {
  const stamp = isPlainObject(e.meta) ? e.meta.forkChain : undefined;
  if (!isPlainObject(stamp) || stamp.chainId !== e.executionId || stamp.generation !== 0) {
    return undefined;
  }
  return { chainId: e.executionId, generation: 0 };
}

/** A copied envelope of a fork (`meta.forkedFrom`). */
function copiedByFork(e: Envelope): boolean {
  return isPlainObject(e.meta) && e.meta.forkedFrom !== undefined;
}

/**
 * MESSAGE_CONSUMED (schema 1.5.0): the chain inbox's message `seq` of `topic` was taken. Only a
 * message past the topic's cursor counts (exactly once). A `duplicate` one (its key is in the
 * dedupe window) only moves the cursor; any other settles the receive `callId` names (or
 * records it, when it was answered at once) and joins the dedupe window.
 */
function consumeMessage(s: ExecutionState, p: Payload, e: Envelope): void {
  const topic = topicOf(p.topic);
  const seq = p.seq;
  const key = p.key;
  if (topic === undefined || !str(key) || typeof seq !== "number") return;
  if (!Number.isSafeInteger(seq) || seq < 0) return;
  if (copiedByFork(e)) {
    // A fork's copy of the original's consumption: it answers the receive (so the re-run
    // replays), but the fork's own inbox starts fresh (V3).
    if (p.duplicate !== true) settleReceive(s, p, e, topic);
    return;
  }
  const inbox = s._inbox ?? { cursors: {}, dedupe: [] };
  const cursor = Object.hasOwn(inbox.cursors, topic) ? (inbox.cursors[topic] ?? -1) : -1;
  if (seq <= cursor) return;
  const seen = inbox.dedupe.includes(key);
  if (p.duplicate === true) {
    if (!seen) return;
    inbox.cursors[topic] = seq;
    s._inbox = inbox;
    return;
  }
  if (seen || !settleReceive(s, p, e, topic)) return;
  inbox.cursors[topic] = seq;
  inbox.dedupe.push(key);
  if (inbox.dedupe.length > DEDUPE_WINDOW) inbox.dedupe.shift();
  s._inbox = inbox;
}

/** Answers the receive a MESSAGE_CONSUMED names; false when it cannot (then it is inert). */
function settleReceive(s: ExecutionState, p: Payload, e: Envelope, topic: string): boolean {
  const head = callHead(p);
  if (!head || head.name !== RECEIVE) return false;
  const output = p.payload === undefined ? null : p.payload;
  const f = frameOf(s, head.callId);
  if (f) {
    if (f.kind !== "receive" || f.status !== "waiting" || f.topic !== topic) return false;
    f.status = "received";
    f.output = output;
    settleWait(s);
    return true;
  }
  s.frames[head.callId] = {
    kind: "receive",
    ...head,
    status: "received",
    firstStartedAt: e.at,
    attempts: 1,
    topic,
    output,
  };
  record(s, head.scope, `receive:${head.callId}`);
  return true;
}

type Handler = (s: ExecutionState, p: Payload, e: Envelope) => void;

const HANDLERS: Partial<Record<string, Handler>> = {
  EXECUTION_STARTED(s, p, e) {
    s.executionId = e.executionId;
    s.flow = str(p.flow) ? p.flow : "";
    s.flowVersion = str(p.flowVersion) ? p.flowVersion : "";
    s.fingerprint = str(p.fingerprint) ? p.fingerprint : "";
    if (p.input !== undefined) s.input = p.input;
    const budget = readBudget(p.budget);
    if (budget) s._budget = budget;
    const deadline = p.deadlineMs;
    if (typeof deadline === "number" && Number.isFinite(deadline) && deadline > 0) {
      s.deadlineMs = deadline;
    }
    s.startedAt = e.at;
    s.status = "pending";
    if (str(p.principal) && p.principal !== "") s._principal = p.principal;
    if (str(p.subject) && p.subject !== "") s._subject = p.subject;
    const parent = readParent(p.parent);
    if (parent) s._parent = parent;
    // A child's deadline is an absolute time (schema 1.7.0): its parent's end caps it (O5).
    const until = p.deadlineAtMs;
    if (typeof until === "number" && Number.isFinite(until)) {
      const left = Math.max(0, until - e.at);
      s.deadlineMs = s.deadlineMs === undefined ? left : Math.min(s.deadlineMs, left);
    }
    const forkChain = forkChainOf(e);
    if (forkChain) {
      // A fork of a chain member is a chain of its own (ADR 0109 D7): no membership, inbox or
      // chain deadline from the copy, but what was spent stays spent (fix round 1 (7)), open
      // grants included.
      s._chain = forkChain;
      const from = isPlainObject(p.continuedFrom) ? readCarried(p.continuedFrom.carried) : {};
      if (from.resources) s._resources = from.resources;
      if (from.scopeResources) s._scopeResources = { ...from.scopeResources };
      // Resume payloads the generation was carried belong to its prefix's replay: kept.
      if (from.resumePayloads) s._resumePayloads = [...from.resumePayloads];
      if (from.quotaExceeded) s._quotaExceeded = from.quotaExceeded;
      // Open child slots the generation was carried: the copy may await them (a watch row
      // settles them, fork.ts V5), and their grants stay counted as spent.
      if (from.children) s._children = structuredCloneJson(from.children);
      return;
    }
    const chain = readChain(p, e.executionId);
    if (chain) seedFromChain(s, chain, e.at);
  },
  STEP_STARTED(s, p, e) {
    if (!callHead(p)) return;
    const existing = frameOf(s, p.callId);
    if (existing) {
      if (existing.kind === "step" && existing.status === "started") {
        existing.attempts++;
        existing.attemptStartedAt = startedAt(p, e);
        delete existing.retryAtMs;
      }
      return;
    }
    openStep(s, p, e);
  },
  STEP_COMPLETED(s, p, e) {
    settleStep(s, p, e, (f) => {
      f.status = "completed";
      delete f.error;
      if (p.output !== undefined) f.output = p.output;
    });
  },
  STEP_FAILED(s, p, e) {
    if (p.retrying === true) {
      // A failed attempt (schema 1.3.0): the step stays open and keeps the attempt's error.
      const f = frameOf(s, p.callId) ?? openStep(s, p, e);
      if (f?.kind !== "step" || f.status !== "started") return;
      f.error = errorOf(p.error);
      delete f.attemptStartedAt;
      const wait = p.retryInMs;
      if (typeof wait === "number" && Number.isFinite(wait) && wait >= 0) f.retryAtMs = e.at + wait;
      return;
    }
    settleStep(s, p, e, (f) => {
      f.status = "failed";
      f.error = errorOf(p.error);
    });
  },
  STEP_CANCELLED(s, p, e) {
    settleStep(s, p, e, (f) => {
      f.status = "cancelled";
      f.error = errorOf(p.error);
    });
  },
  DECISION_RECORDED(s, p) {
    const head = callHead(p);
    if (!head || Object.hasOwn(s._decisions, head.callId) || p.value === undefined) return;
    s._decisions[head.callId] = p.value;
    record(s, head.scope, `decision:${head.callId}`);
    if (head.name === NEGOTIATE) applyGrant(s, p.value);
  },
  TIMER_SCHEDULED(s, p, e) {
    const head = callHead(p);
    const wakeAtMs = p.wakeAtMs;
    if (!head || frameOf(s, head.callId) || typeof wakeAtMs !== "number") return;
    if (!Number.isFinite(wakeAtMs)) return;
    s.frames[head.callId] = {
      kind: "sleep",
      ...head,
      status: "waiting",
      firstStartedAt: e.at,
      attempts: 1,
      wakeAtMs,
    };
    record(s, head.scope, `sleep:${head.callId}`);
    s.openWaits++;
  },
  TIMER_FIRED(s, p) {
    const f = frameOf(s, p.callId);
    if (!f || f.status !== "waiting") return;
    if (f.kind === "sleep") {
      f.status = "fired";
    } else if (f.kind === "suspend" && f.wakeAtMs !== undefined) {
      f.status = "timedOut";
      s._openSuspends = s._openSuspends.filter((id) => id !== p.callId);
    } else if (f.kind === "receive" && f.wakeAtMs !== undefined) {
      f.status = "timedOut";
    } else return;
    settleWait(s);
  },
  SUSPENDED(s, p, e) {
    const head = callHead(p);
    if (!head || frameOf(s, head.callId)) return;
    if (head.name === AWAIT_CHILD) return awaitChild(s, p, e);
    if (head.name === RECEIVE) {
      // A receive's wait (schema 1.5.0): settled by a MESSAGE_CONSUMED, never by a resume.
      const topic = topicOf(p.topic);
      if (topic === undefined) return;
      const f: Frame = {
        kind: "receive",
        ...head,
        status: "waiting",
        firstStartedAt: e.at,
        attempts: 1,
        topic,
      };
      if (typeof p.wakeAtMs === "number" && Number.isFinite(p.wakeAtMs)) f.wakeAtMs = p.wakeAtMs;
      s.frames[head.callId] = f;
      record(s, head.scope, `receive:${head.callId}`);
      s.openWaits++;
      return;
    }
    const f: Frame = {
      kind: "suspend",
      ...head,
      status: "waiting",
      firstStartedAt: e.at,
      attempts: 1,
    };
    if (typeof p.wakeAtMs === "number" && Number.isFinite(p.wakeAtMs)) f.wakeAtMs = p.wakeAtMs;
    s.frames[head.callId] = f;
    record(s, head.scope, `suspend:${head.callId}`);
    if (s._resumePayloads.length > 0) {
      f.status = "resumed";
      const queued = s._resumePayloads.shift();
      if (queued !== undefined) f.output = queued;
      return;
    }
    s._openSuspends.push(head.callId);
    s.openWaits++;
  },
  RESUMED(s, p) {
    const payload = p.payload === undefined ? null : p.payload;
    const callId = s._openSuspends.shift();
    const f = frameOf(s, callId);
    if (!f) {
      s._resumePayloads.push(payload);
      return;
    }
    f.status = "resumed";
    f.output = payload;
    settleWait(s);
  },
  MESSAGE_CONSUMED(s, p, e) {
    consumeMessage(s, p, e);
  },
  RESOURCE_METERED(s, p) {
    if (!isPlainObject(p.delta)) return;
    s._resources = addResources(s._resources ?? {}, p.delta);
    if (!Array.isArray(p.budgets)) return;
    for (const name of p.budgets) {
      if (!str(name) || !safeKey(name)) continue;
      const scopes = (s._scopeResources ??= {});
      scopes[name] = addResources(Object.hasOwn(scopes, name) ? (scopes[name] ?? {}) : {}, p.delta);
    }
  },
  QUOTA_EXCEEDED(s, p) {
    if (!str(p.dimension)) return;
    s._quotaExceeded = { dimension: p.dimension, budget: str(p.budget) ? p.budget : "execution" };
  },
  EXECUTION_COMPLETED(s, p, e) {
    if (!isTerminalEvent(e)) return;
    s.status = "completed";
    if (p.output !== undefined) s.output = p.output;
  },
  EXECUTION_FAILED(s, p, e) {
    if (!isTerminalEvent(e)) return;
    s.status = "failed";
    s.error = errorOf(p.error);
  },
  EXECUTION_CANCELLED(s, p, e) {
    if (!isTerminalEvent(e)) return;
    s.status = "cancelled";
    s.error = errorOf(p.error);
  },
  EXECUTION_CONTINUED(s, p, e) {
    if (!isTerminalEvent(e)) return;
    s.status = "continued";
    if (str(p.successorId)) s._continuedTo = p.successorId;
  },
  CHILD_STARTED(s, p, e) {
    startChild(s, p, e);
  },
  CHILD_DONE(s, p) {
    childDone(s, p);
  },
  SUBJECT_ERASED(s, p, e) {
    if (e.meta?.kernel !== true || !str(p.subject) || p.subject === "") return;
    (s._erased ??= []).push(p.subject);
  },
  STATE_RESTORED(s, p, e) {
    // Kernel-stamped only (schema 1.6.0): an app event that borrows the name is inert.
    if (e.meta?.kernel !== true) return;
    const record = readRestored(p.state);
    if (typeof record === "string") return;
    applyRestored(s, record);
    if (str(p.flow) && p.flow !== "") {
      s.flow = p.flow;
      s.flowVersion = str(p.flowVersion) ? p.flowVersion : "";
      s.fingerprint = str(p.fingerprint) ? p.fingerprint : "";
    }
  },
};
