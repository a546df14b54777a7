/**
 * The redacted state erasure leaves in a log's snapshot (erase-subject.ts X5, issue 22): built from
 * an allow-list, never by deleting what is known to hold data, so a field added later, or one the
 * fold fills from a carry, cannot survive an erasure because nobody thought of it.
 *
 * Invariants (tests cite X5a..X5c):
 * X5a. Every key of ExecutionState has an entry in KEPT, which builds its redacted value from the
 *      state: the compiler refuses a new field until someone decides whether it is identity or
 *      accounting. Nothing is copied that KEPT does not name, at any depth: a known object
 *      (the chain, the parent link, a child record, a budget, what was spent) is rebuilt from its
 *      known parts, never spread.
 * X5b. What is kept is identity and accounting, none of it the subject's content: ids, status,
 *      flow name, version and fingerprint, timestamps, the deadline, the budget, what was spent
 *      (and in which named scope), the owner, the queue's name, priority and admission time, the chain's and the parent's identity, each child's
 *      flow, budget and how it ended (status and spending), the subjects erased. Dropped: input,
 *      output, error, frames, decisions, queued and carried payloads, the inbox (its cursors and
 *      message keys), `_subject` (so the snapshot is sealed with the codec's key, not the erased
 *      subject's).
 * X5c. The body's record is empty, not absent: frames, order, decisions, queues and the values of
 *      calls kept without a frame (when the state keeps them) are `{}` or `[]` and nothing is in
 *      flight or waiting, so the state is well formed for the fold.
 */
import type { ExecutionState } from "../fold/state.ts";
import type { ChainIdentity, Carried } from "../kernel/chain.ts";
import type { ChildOutcome, ChildRecord, ParentLink } from "../kernel/children.ts";
import { addResources, readBudget, type ResourceSnapshot } from "../kernel/resources.ts";

type Kept = { [K in keyof ExecutionState]-?: (s: ExecutionState) => ExecutionState[K] | undefined };

const dropped = (): undefined => undefined;

/** X5a: how each field of the state is kept; `dropped` for what is the subject's. */
const KEPT: Kept = {
  executionId: (s) => s.executionId,
  seq: (s) => s.seq,
  status: (s) => s.status,
  flow: (s) => s.flow,
  flowVersion: (s) => s.flowVersion,
  fingerprint: (s) => s.fingerprint,
  input: dropped,
  startedAt: (s) => s.startedAt,
  updatedAt: (s) => s.updatedAt,
  output: dropped,
  error: dropped,
  frames: () => ({}),
  order: () => ({}),
  // An execution that keeps calls by their value keeps doing so, with none (fold/settled.ts L5).
  _settled: (s) => (s._settled === undefined ? undefined : {}),
  inFlight: () => 0,
  openWaits: () => 0,
  _decisions: () => ({}),
  _resumePayloads: () => [],
  _openSuspends: () => [],
  deadlineMs: (s) => finite(s.deadlineMs),
  _budget: (s) => readBudget(s._budget),
  _resources: (s) => spent(s._resources),
  _scopeResources: (s) => spentByScope(s._scopeResources),
  _quotaExceeded: (s) => quota(s._quotaExceeded),
  _chain: (s) => s._chain && chain(s._chain),
  _continuedTo: (s) => text(s._continuedTo),
  _inbox: dropped,
  _principal: (s) => text(s._principal),
  _subject: dropped,
  // The queue's name and when it admitted the execution; its key and dedupe key may name the
  // subject (a user, a conversation): dropped.
  _queue: (s) => s._queue && queueKept(s._queue),
  _forkedFrom: (s) =>
    s._forkedFrom && { executionId: s._forkedFrom.executionId, seq: s._forkedFrom.seq },
  _erased: (s) => s._erased?.filter((x) => typeof x === "string"),
  _parent: (s) => s._parent && parent(s._parent),
  _children: (s) =>
    s._children && Object.fromEntries(Object.entries(s._children).map(([id, c]) => [id, child(c)])),
};

/** X5: the state erasure leaves, built from KEPT alone. */
export function redactedState(state: ExecutionState): ExecutionState {
  const out: Record<string, unknown> = {};
  for (const [key, keep] of Object.entries(KEPT) as [string, (s: ExecutionState) => unknown][]) {
    const value = keep(state);
    if (value !== undefined) out[key] = value;
  }
  return out as unknown as ExecutionState;
}

const text = (v: string | undefined): string | undefined => (typeof v === "string" ? v : undefined);

function queueKept(q: NonNullable<ExecutionState["_queue"]>): ExecutionState["_queue"] {
  const kept: NonNullable<ExecutionState["_queue"]> = { name: String(q.name), priority: 0 };
  if (Number.isSafeInteger(q.priority)) kept.priority = q.priority;
  if (finite(q.admittedAt) !== undefined) kept.admittedAt = q.admittedAt;
  if (finite(q.waitedMs) !== undefined) kept.waitedMs = q.waitedMs;
  return kept;
}

const finite = (v: number | undefined): number | undefined =>
  typeof v === "number" && Number.isFinite(v) ? v : undefined;

/** Known dimensions only (resources.ts Q2), with the `costUnknown` mark (Q7). */
function spent(v: ResourceSnapshot | undefined): ResourceSnapshot | undefined {
  if (v === undefined) return undefined;
  const out = addResources({}, v);
  return Object.keys(out).length > 0 ? out : undefined;
}

function spentByScope(
  v: Record<string, ResourceSnapshot> | undefined,
): Record<string, ResourceSnapshot> | undefined {
  if (v === undefined) return undefined;
  return Object.fromEntries(Object.entries(v).map(([name, s]) => [name, spent(s) ?? {}]));
}

function quota(v: ExecutionState["_quotaExceeded"]): ExecutionState["_quotaExceeded"] {
  return v && { dimension: v.dimension, budget: v.budget };
}

/** The chain's identity and what the carry brought that is accounting: spending and deadline. */
function chain(v: ChainIdentity): ChainIdentity {
  const out: ChainIdentity = { chainId: v.chainId, generation: v.generation };
  const from = v.continuedFrom;
  if (from) {
    const c = from.carried;
    const carried: Carried = {};
    const resources = spent(c.resources);
    if (resources) carried.resources = resources;
    const scopes = spentByScope(c.scopeResources);
    if (scopes) carried.scopeResources = scopes;
    const q = quota(c.quotaExceeded);
    if (q) carried.quotaExceeded = q;
    const deadline = finite(c.chainDeadline);
    if (deadline !== undefined) carried.chainDeadline = deadline;
    out.continuedFrom = { executionId: from.executionId, carried };
  }
  return out;
}

function parent(v: ParentLink): ParentLink {
  const out: ParentLink = {
    executionId: v.executionId,
    chainId: v.chainId,
    callId: v.callId,
    detached: v.detached === true,
  };
  if (v.granted === true) out.granted = true;
  return out;
}

/** A child's slot: its flow, budget and deadline, and how it ended without what it returned. */
function child(v: ChildRecord): ChildRecord {
  const out: ChildRecord = { callId: v.callId, flow: v.flow, detached: v.detached === true };
  const budget = readBudget(v.budget);
  if (budget) out.budget = budget;
  if (v.granted === true) out.granted = true;
  if (Array.isArray(v.budgets)) out.budgets = v.budgets.filter((b) => typeof b === "string");
  const deadline = finite(v.deadlineAtMs);
  if (deadline !== undefined) out.deadlineAtMs = deadline;
  if (v.outcome) {
    const outcome: ChildOutcome = { status: v.outcome.status };
    const resources = spent(v.outcome.resources);
    if (resources) outcome.resources = resources;
    out.outcome = outcome;
  }
  return out;
}
