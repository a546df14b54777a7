/**
 * The fold of children (schema 1.7.0; ADR 0109 D5, D6): what a parent's log says of the children
 * it spawned and awaits.
 *
 * Invariants (tests cite F8..F10):
 * F8. A CHILD_STARTED records the spawn once: a `spawn` frame (its output is the child's handle)
 *     and an entry in `_children`, with the child's share of the budget when it was granted one.
 * F9. A child's slot settles once: the first CHILD_DONE with a settled outcome (P3) for a child
 *     in `_children` records it, adds what the child's chain spent to `_resources` (and to the
 *     nested budgets' scopes it was spawned under, schema 1.9.0), and settles
 *     every wait on it. A CHILD_DONE for an id the parent did not spawn (a detached child of an
 *     earlier generation, whose id came in the carry) records its outcome and settles waits on it,
 *     and adds nothing to `_resources`.
 * F10. What a parent has spent, for its budgets, is `_resources` plus the grants of its children
 *     whose slots are not settled (`spentWithGrants`), so children cannot spend past it; for a
 *     nested budget, its scope's spend plus the grants of those spawned under it
 *     (`scopeSpentWithGrants`).
 */
import { childOf, grantAsSpent, readChildOutcome, type ChildRecord } from "../kernel/children.ts";
import type { Envelope } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";
import { isPlainObject } from "../kernel/json.ts";
import { addResources, readBudget, type ResourceSnapshot } from "../kernel/resources.ts";
import { callHead, record, safeKey, settleWait, str, type Payload } from "./frames.ts";
import { isRecorded } from "./settled.ts";
import type { ExecutionState, Frame } from "./state.ts";

/** The name of ctx.awaitChild calls (a SUSPENDED with it is a wait on a child). */
export const AWAIT_CHILD = "awaitChild";

/** F8 */
export function startChild(s: ExecutionState, p: Payload, e: Envelope): void {
  const head = callHead(p);
  const childId = p.childId;
  if (!head || !str(childId) || !safeKey(childId) || !str(p.flow)) return;
  if (isRecorded(s, head.callId) || (s._children && Object.hasOwn(s._children, childId))) return;
  const detached = p.detached === true;
  s.frames[head.callId] = {
    kind: "spawn",
    ...head,
    status: "completed",
    firstStartedAt: e.at,
    attempts: 1,
    childId,
    output: { id: childId, flow: p.flow, detached },
  };
  const spawn = s.frames[head.callId];
  if (spawn && p.input !== undefined) spawn.input = p.input;
  record(s, head.scope, `spawn:${head.callId}`);
  const child: ChildRecord = { callId: head.callId, flow: p.flow, detached };
  const budget = isPlainObject(p.budget) ? readBudget(p.budget) : undefined;
  if (budget) {
    child.budget = budget;
    if (p.granted === true) child.granted = true;
  }
  if (Array.isArray(p.budgets)) {
    const names = p.budgets.filter((b): b is string => str(b) && safeKey(b));
    if (names.length > 0) child.budgets = names;
  }
  const deadlineAtMs = p.deadlineAtMs;
  if (typeof deadlineAtMs === "number" && Number.isFinite(deadlineAtMs)) {
    child.deadlineAtMs = deadlineAtMs;
  }
  (s._children ??= {})[childId] = child;
}

/** F9 */
export function childDone(s: ExecutionState, p: Payload): void {
  const childId = p.childId;
  const outcome = readChildOutcome(p.outcome);
  if (!str(childId) || !outcome) return;
  const child = childOf(s._children, childId);
  if (child) {
    if (child.outcome) return;
    child.outcome = outcome;
    if (outcome.resources) {
      s._resources = addResources(s._resources ?? {}, outcome.resources);
      for (const name of child.budgets ?? []) {
        const scopes = (s._scopeResources ??= {});
        const before = Object.hasOwn(scopes, name) ? (scopes[name] ?? {}) : {};
        scopes[name] = addResources(before, outcome.resources);
      }
    }
  } else {
    // A child of an earlier generation (its id in the carry): known by its outcome only.
    if (!safeKey(childId)) return;
    (s._children ??= {})[childId] = { callId: "", flow: "", detached: true, outcome };
  }
  for (const f of Object.values(s.frames)) {
    if (f.kind !== "child" || f.childId !== childId || f.status !== "waiting") continue;
    settle(f, outcome as unknown as Json);
    settleWait(s);
  }
}

/** A SUSPENDED named AWAIT_CHILD: a wait, settled at once when the slot already is. */
export function awaitChild(s: ExecutionState, p: Payload, e: Envelope): void {
  const head = callHead(p);
  const childId = p.childId;
  if (!head || !str(childId) || isRecorded(s, head.callId)) return;
  const f: Frame = {
    kind: "child",
    ...head,
    status: "waiting",
    firstStartedAt: e.at,
    attempts: 1,
    childId,
  };
  s.frames[head.callId] = f;
  record(s, head.scope, `child:${head.callId}`);
  const outcome = childOf(s._children, childId)?.outcome;
  if (outcome) settle(f, outcome as unknown as Json);
  else s.openWaits++;
}

function settle(f: Frame, outcome: Json): void {
  f.status = "settled";
  f.output = outcome;
}

/** F10: `_resources` with the unsettled children's grants counted as spent. */
export function spentWithGrants(s: ExecutionState): ResourceSnapshot {
  let spent = s._resources ?? {};
  for (const child of Object.values(s._children ?? {})) {
    if (child.granted && child.budget && !child.outcome) {
      spent = addResources(spent, grantAsSpent(child.budget));
    }
  }
  return spent;
}

/**
 * F10 for a nested budget: what its scope has spent, with the grants of the unsettled children
 * spawned under it counted as spent.
 */
export function scopeSpentWithGrants(s: ExecutionState, name: string): ResourceSnapshot {
  const scopes = s._scopeResources;
  let spent = scopes !== undefined && Object.hasOwn(scopes, name) ? (scopes[name] ?? {}) : {};
  for (const child of Object.values(s._children ?? {})) {
    if (child.granted && child.budget && !child.outcome && child.budgets?.includes(name)) {
      spent = addResources(spent, grantAsSpent(child.budget));
    }
  }
  return spent;
}

/**
 * The children whose ends `s` waits for: those whose slots are open, and those awaited with no
 * slot here (a detached child of an earlier generation, its id in the carry; a fork's copy of
 * such a wait, cut before its CHILD_DONE).
 */
export function awaitedChildren(s: ExecutionState): Set<string> {
  const ids = new Set<string>();
  for (const [id, c] of Object.entries(s._children ?? {})) if (!c.outcome) ids.add(id);
  for (const f of Object.values(s.frames)) {
    if (f.kind !== "child" || f.status !== "waiting" || f.childId === undefined) continue;
    if (!childOf(s._children, f.childId)) ids.add(f.childId);
  }
  return ids;
}

/** The children a cascade cancels (D5): attached, and their slots not settled. */
export function openAttachedChildren(s: ExecutionState): string[] {
  return Object.entries(s._children ?? {})
    .filter(([, c]) => !c.detached && !c.outcome)
    .map(([id]) => id);
}

/** The records of the children whose slots are open (a successor carries them), or undefined. */
export function openChildren(s: ExecutionState): Record<string, ChildRecord> | undefined {
  const open = Object.entries(s._children ?? {}).filter(([, c]) => !c.outcome);
  if (open.length === 0) return undefined;
  const out: Record<string, ChildRecord> = {};
  for (const [id, c] of open) {
    const record: ChildRecord = { callId: "", flow: c.flow, detached: c.detached };
    if (c.budget) record.budget = c.budget;
    if (c.granted) record.granted = true;
    out[id] = record;
  }
  return out;
}
