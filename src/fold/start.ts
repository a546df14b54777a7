/**
 * The fold of EXECUTION_STARTED (fold.ts F6: only at sequence 0): the flow, its input, budget and
 * deadline, the principal, subject and parent, and the state a chain's successor or a fork's copy
 * starts from.
 *
 * Invariants:
 * - A successor's sequence 0 (schema 1.5.0) seeds its state from what it carried, so replay needs
 *   no runtime help (ADR 0109 D3); the chain's deadline caps its own.
 * - A child's deadline is an absolute time (schema 1.7.0): its parent's end caps it (O5).
 * - A fork of a chain member is a chain of its own (ADR 0109 D7): it takes no membership, inbox
 *   or chain deadline from the copy, but what was spent stays spent.
 * - A start recording schema 1.13.0 or later keeps its plainly settled calls by their value
 *   (`_settled`, settled.ts L1); an earlier one keeps every frame, as it always did.
 */
import type { Envelope } from "../kernel/events.ts";
import { isPlainObject } from "../kernel/json.ts";
import { readBudget } from "../kernel/resources.ts";
import { readCarried, readChain, type ChainIdentity } from "../kernel/chain.ts";
import { readParent } from "../kernel/children.ts";
import { readQueueMark } from "../kernel/queue.ts";
import { str } from "./frames.ts";
import { leanSince } from "./settled.ts";
import type { Handlers } from "./handler.ts";
import type { ExecutionState } from "./state.ts";

export const START_HANDLERS: Handlers = {
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
    // Schema 1.13.0: a plainly settled call is kept by its value alone (settled.ts L1).
    if (leanSince(p.schemaVersion)) s._settled = {};
    // Schema 1.12.0: recorded with a queue, it waits there until admitted (queue.ts QF1); a
    // chain's successor takes its predecessor's slot, admitted already (QF4).
    const queue = readQueueMark(p.queue);
    if (queue) {
      s._queue = queue;
      const admittedAt = isPlainObject(p.queue) ? p.queue.admittedAt : undefined;
      if (typeof admittedAt === "number" && Number.isFinite(admittedAt)) {
        s._queue.admittedAt = admittedAt;
      } else {
        s.status = "queued";
      }
    }
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
};

/** A copy of plain JSON records (the fold changes `_children` in place; `_chain` must not). */
function structuredCloneJson<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/**
 * A successor's sequence 0 (schema 1.5.0): what it carried from its predecessor seeds its
 * state, so replay needs no runtime help (ADR 0109 D3), and the chain's deadline caps its own.
 */
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
