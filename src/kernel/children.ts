/**
 * Children (ADR 0109 D5, D6; the orchestration ADR 0112 D5 it relies on): the pure pieces. A
 * flow spawns a child execution with `ctx.spawn` and awaits it with `ctx.awaitChild`; the child's
 * id is `<parentId>::<key>#<i>`, `i` the occurrence of `key` among the parent's spawns.
 *
 * Invariants (tests cite P1..P3; the runtime's are O1..O7 in runtime/children.ts):
 * P1. `childIdOf` is the only way a child id is made, and a child id's last segment never has
 *     the successor shape (a key is refused if `<key>#<i>` would).
 * P2. `readParent` and `readChildOutcome` never throw and take only well-formed parts, the
 *     same way on every replica.
 * P3. A child's outcome is one of the terminal statuses other than `continued`: a continued
 *     child is "look at its head", never a settled result (D6).
 */
import { isPlainObject, type Json } from "./json.ts";
import type { ExecutionStatus } from "./events.ts";
import { readErrorData, type ErrorData } from "./errors.ts";
import {
  addResources,
  SCALAR_DIMENSIONS,
  readBudget,
  spentIn,
  type Budget,
  type ResourceSnapshot,
} from "./resources.ts";

/** Who spawned an execution: recorded in its EXECUTION_STARTED, inherited along its chain. */
export interface ParentLink {
  executionId: string;
  /**
   * The parent's chain: where the child's end is reported (routed to the chain's head, so a
   * generation released by retention is not needed), and what an awaiting generation checks.
   */
  chainId: string;
  /** The spawn's call id in the parent. */
  callId: string;
  /** A detached child is not cancelled with its parent (D5). */
  detached: boolean;
  /**
   * Its budget is a grant carved from its parent's (O6; schema 1.9.0): its negotiation cannot
   * pass it (runtime/syscalls-budgets.ts N2).
   */
  granted?: true;
}

/** How a child's chain ended, as its parent records it (CHILD_DONE). */
export interface ChildOutcome {
  status: "completed" | "failed" | "cancelled";
  output?: Json;
  error?: ErrorData;
  /** What the child's chain spent in all: the parent's tree spends it too (O6). */
  resources?: ResourceSnapshot;
}

/** A spawned child as its parent's fold keeps it. */
export interface ChildRecord {
  callId: string;
  flow: string;
  detached: boolean;
  /** The child's budget: a share of the parent's when `granted` (O6), else its own. */
  budget?: Budget;
  /** The budget is a grant of the parent's: counted as spent until the slot settles. */
  granted?: true;
  /**
   * The nested budgets (ctx.nestedBudget) the spawn was made under, whose scopes count the grant
   * and then what the child's chain spent (schema 1.9.0; fold/children.ts F10, F9).
   */
  budgets?: string[];
  /** When the child's deadline ends (runtime clock), capped by the parent's (O5). */
  deadlineAtMs?: number;
  /** Set by the first CHILD_DONE: the slot is settled. */
  outcome?: ChildOutcome;
}

/** The reason a cascade cancels with (ADR 0112 D5). */
export function cascadeReason(parent: string): { kind: "cascade"; parent: string } {
  return { kind: "cascade", parent };
}

const KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@/+=-]*$/;

/** P1: a spawn key, or the reason it cannot be one. */
export function keyProblem(key: string): string | undefined {
  if (key.length === 0 || key.length > 100) return "a spawn key is 1 to 100 characters";
  if (!KEY_PATTERN.test(key)) {
    return "a spawn key starts with a letter or digit and uses only letters, digits and . _ @ / + = -";
  }
  return undefined;
}

/**
 * P1: the id of the child a spawn with call id `callId` makes: `<parentId>::<key>#<i>` for a
 * spawn in the flow body (its call id is `<key>#<i>`), the branch's scope before the key in a
 * ctx.parallel branch.
 */
export function childIdOf(parentId: string, callId: string): string {
  return `${parentId}::${callId}`;
}

/** P2: the parent link an EXECUTION_STARTED payload records, if it records a valid one. */
export function readParent(v: Json | undefined): ParentLink | undefined {
  if (!isPlainObject(v)) return undefined;
  const { executionId, callId, detached, chainId } = v;
  if (typeof executionId !== "string" || executionId === "") return undefined;
  if (typeof callId !== "string" || callId === "") return undefined;
  const chain = typeof chainId === "string" && chainId !== "" ? chainId : executionId;
  const link: ParentLink = { executionId, chainId: chain, callId, detached: detached === true };
  if (v.granted === true) link.granted = true;
  return link;
}

const SETTLED: readonly ExecutionStatus[] = ["completed", "failed", "cancelled"];

/** P2, P3: a CHILD_DONE's outcome, if it is a settled one. */
export function readChildOutcome(v: Json | undefined): ChildOutcome | undefined {
  if (!isPlainObject(v) || !SETTLED.includes(v.status as ExecutionStatus)) return undefined;
  const out: ChildOutcome = { status: v.status as ChildOutcome["status"] };
  if (v.output !== undefined) out.output = v.output;
  const error = readErrorData(v.error, "LOOM_CHILD");
  if (error) out.error = error;
  if (isPlainObject(v.resources)) {
    const resources = addResources({}, v.resources);
    if (Object.keys(resources).length > 0) out.resources = resources;
  }
  return out;
}

/**
 * The share of `budget` a child may spend (O6): in each of its dimensions, what is left after
 * `spent` (which counts the grants still out), or less when the spawn asked for less.
 */
/**
 * O6 across every budget in force (issue 20): what a child may spend is what is left of each
 * budget around the spawn (the execution's and the nested ones, each after what it has spent and
 * what calls in flight hold), the smallest in each dimension, and no more than it asked. A
 * dimension no budget limits keeps what was asked.
 */
export function grantWithin(
  budgets: readonly { budget: Budget; spent: ResourceSnapshot }[],
  asked: Budget | undefined,
): Budget | undefined {
  let grant = asked;
  for (const b of budgets) {
    const narrowed = grantOf(b.budget, b.spent, grant);
    const custom =
      grant?.custom || narrowed.custom ? { ...grant?.custom, ...narrowed.custom } : undefined;
    grant = { ...grant, ...narrowed };
    if (custom) grant.custom = custom;
  }
  return grant;
}

export function grantOf(
  budget: Budget,
  spent: ResourceSnapshot,
  asked: Budget | undefined,
): Budget {
  const left = (dimension: string, limit: number, ask: number | undefined) => {
    const free = Math.max(0, limit - spentIn(spent, dimension));
    return ask === undefined ? free : Math.min(free, ask);
  };
  const grant: Budget = {};
  if (budget.tokens !== undefined) grant.tokens = left("tokens", budget.tokens, asked?.tokens);
  for (const k of SCALAR_DIMENSIONS) {
    const limit = budget[k];
    if (limit !== undefined) grant[k] = left(k, limit, asked?.[k]);
  }
  for (const [k, limit] of Object.entries(budget.custom ?? {})) {
    (grant.custom ??= {})[k] = left(`custom.${k}`, limit, asked?.custom?.[k]);
  }
  return grant;
}

/** A grant counted as spent while its child runs (F10): its limits as amounts. */
export function grantAsSpent(grant: Budget): ResourceSnapshot {
  const { tokens, ...rest } = grant;
  return addResources({}, tokens === undefined ? rest : { ...rest, tokens: { input: tokens } });
}

/** The record of `childId` in `children`, own keys only (an id is never a prototype key). */
export function childOf(
  children: Record<string, ChildRecord> | undefined,
  childId: string,
): ChildRecord | undefined {
  return children && Object.hasOwn(children, childId) ? children[childId] : undefined;
}

/** P2: the open children a successor carries (their grants stay out until their slots settle). */
export function readCarriedChildren(v: Json | undefined): Record<string, ChildRecord> | undefined {
  if (!isPlainObject(v)) return undefined;
  const out: Record<string, ChildRecord> = {};
  for (const [id, c] of Object.entries(v)) {
    if (id === "" || id === "__proto__" || !isPlainObject(c) || typeof c.flow !== "string")
      continue;
    const record: ChildRecord = { callId: "", flow: c.flow, detached: c.detached === true };
    const budget = readBudget(c.budget);
    if (budget) record.budget = budget;
    if (budget && c.granted === true) record.granted = true;
    out[id] = record;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
