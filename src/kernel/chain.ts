/**
 * Chains of generations (ADR 0109): the pure pieces. A chain's first execution is generation 0
 * and its id is the chain id; generation n is `<chainId>~<n>`. A successor's EXECUTION_STARTED
 * names its chain, its generation and `continuedFrom: { executionId, carried }`, where `carried`
 * is what it inherits from its predecessor's fold (D3): the running resource totals (a rotation
 * cannot reset a quota), the inbox cursors and dedupe window (ADR 0110), the budget and the
 * absolute chain deadline (the budget itself rides the successor's `budget`, as at any start).
 *
 * Invariants (tests cite C1..C4):
 * C1. `readCarried` never throws and takes only well-formed parts: finite non-negative numbers
 *     for resources, non-negative safe integers for cursors under safe topic names, strings for
 *     the dedupe window (its last DEDUPE_WINDOW), a finite chain deadline. Anything else is
 *     dropped, the same way on every replica.
 * C2. The successor shape is reserved: an id whose last `::` segment is `<something>~<digits>`
 *     (the empty something included: `edge::~1`) is the id of a chain's next generation, and no
 *     caller may create it.
 * C3. A successor is verified before anyone follows it: its id is `<chainId>~<generation>`, it
 *     names the hop it came from, it is the next generation of the same chain, and it records
 *     the same principal and the same parent (fix round 1 (2)).
 * C4. `successorIdOf(chainId, n)` is the only way a successor id is made.
 */
import { isPlainObject, type Json } from "./json.ts";
import { addResources, type ResourceSnapshot } from "./resources.ts";
import { readCarriedChildren, type ChildRecord } from "./children.ts";

/** How many consumed message keys a chain remembers to drop a sender's retry (ADR 0110 D6). */
export const DEDUPE_WINDOW = 1024;

/** An execution's place in the inbox of its chain: per topic, the last consumed sequence. */
export interface InboxState {
  cursors: Record<string, number>;
  /** The keys of the last DEDUPE_WINDOW consumed messages, oldest first. */
  dedupe: string[];
}

/** What a successor inherits from its predecessor (D3), recorded in its sequence 0. */
export interface Carried {
  resources?: ResourceSnapshot;
  /** What each named nested budget's scope spent: a rotation cannot reset those either. */
  scopeResources?: Record<string, ResourceSnapshot>;
  quotaExceeded?: { dimension: string; budget: string };
  inbox?: InboxState;
  /** The chain's absolute deadline (epoch ms on the runtime clock), fixed at generation 0. */
  chainDeadline?: number;
  /**
   * The predecessor's children whose slots were open at the commit (issue 8): their grants stay
   * counted, and the successor settles them when their CHILD_DONE reaches it.
   */
  children?: Record<string, ChildRecord>;
  /** Resume payloads that arrived while no suspend waited: the successor's first suspends get them. */
  resumePayloads?: Json[];
}

export interface ChainIdentity {
  chainId: string;
  generation: number;
  continuedFrom?: { executionId: string; carried: Carried };
}

/** C4: the id of generation `generation` of `chainId`. */
export function successorIdOf(chainId: string, generation: number): string {
  return `${chainId}~${generation}`;
}

// `.*`, not `.+`: the successor of a chain id ending in `::` (`edge::` → `edge::~1`) is one too.
const SUCCESSOR_SHAPE = /^.*~[0-9]+$/;

/** The text after the last `::` (the whole id when it has none). */
export function lastSegment(id: string): string {
  const i = id.lastIndexOf("::");
  return i < 0 ? id : id.slice(i + 2);
}

/** The text before the first `::` (the whole id when it has none). */
export function rootSegment(id: string): string {
  const i = id.indexOf("::");
  return i < 0 ? id : id.slice(0, i);
}

/**
 * C2: "last" when the id's last segment has the successor shape (nobody may create it);
 * "root" when only its root segment has it (a child of a generation: only the kernel's own
 * orchestration may create it, under an existing parent); undefined otherwise.
 */
export function successorShape(id: string): "last" | "root" | undefined {
  if (SUCCESSOR_SHAPE.test(lastSegment(id))) return "last";
  if (SUCCESSOR_SHAPE.test(rootSegment(id))) return "root";
  return undefined;
}

const isSafeName = (k: string) => k !== "" && k !== "__proto__" && k.length <= 200;

/** C1: the inbox part of a carry, or of anything claiming to be one. */
export function readInbox(v: Json | undefined): InboxState | undefined {
  if (!isPlainObject(v)) return undefined;
  const cursors: Record<string, number> = {};
  if (isPlainObject(v.cursors)) {
    for (const [topic, seq] of Object.entries(v.cursors)) {
      if (isSafeName(topic) && Number.isSafeInteger(seq) && (seq as number) >= 0) {
        cursors[topic] = seq as number;
      }
    }
  }
  const dedupe = Array.isArray(v.dedupe)
    ? v.dedupe.filter((k): k is string => typeof k === "string").slice(-DEDUPE_WINDOW)
    : [];
  return { cursors, dedupe };
}

/** C1: a carry read defensively. */
export function readCarried(v: Json | undefined): Carried {
  const out: Carried = {};
  if (!isPlainObject(v)) return out;
  if (isPlainObject(v.resources)) {
    const resources = addResources({}, v.resources);
    if (Object.keys(resources).length > 0) out.resources = resources;
  }
  if (isPlainObject(v.scopeResources)) {
    const scopes: Record<string, ResourceSnapshot> = {};
    for (const [name, spent] of Object.entries(v.scopeResources)) {
      if (isSafeName(name) && isPlainObject(spent)) scopes[name] = addResources({}, spent);
    }
    if (Object.keys(scopes).length > 0) out.scopeResources = scopes;
  }
  const q = v.quotaExceeded;
  if (isPlainObject(q) && typeof q.dimension === "string") {
    out.quotaExceeded = {
      dimension: q.dimension,
      budget: typeof q.budget === "string" ? q.budget : "execution",
    };
  }
  const inbox = readInbox(v.inbox);
  if (inbox) out.inbox = inbox;
  if (Array.isArray(v.resumePayloads) && v.resumePayloads.length > 0) {
    out.resumePayloads = v.resumePayloads;
  }
  const children = readCarriedChildren(v.children);
  if (children) out.children = children;
  const deadline = v.chainDeadline;
  if (typeof deadline === "number" && Number.isFinite(deadline)) out.chainDeadline = deadline;
  return out;
}

/** The chain identity an EXECUTION_STARTED payload records, if it records a valid one. */
export function readChain(
  p: { [k: string]: Json },
  executionId: string,
): ChainIdentity | undefined {
  const { chainId, generation, continuedFrom } = p;
  if (typeof chainId !== "string" || chainId === "") return undefined;
  if (!Number.isSafeInteger(generation) || (generation as number) < 1) return undefined;
  if (!isPlainObject(continuedFrom) || typeof continuedFrom.executionId !== "string") {
    return undefined;
  }
  // C3, as far as one log can tell: the id is the one this generation of this chain must have.
  if (executionId !== successorIdOf(chainId, generation as number)) return undefined;
  return {
    chainId,
    generation: generation as number,
    continuedFrom: {
      executionId: continuedFrom.executionId,
      carried: readCarried(continuedFrom.carried),
    },
  };
}
