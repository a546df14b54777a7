/** What the flow context's syscalls need from the runtime that drives the run. */
import type { Json } from "../kernel/json.ts";
import type { Limits } from "../kernel/limits.ts";
import type { ExecutionState } from "../fold/state.ts";
import type { ChildOutcome } from "../kernel/children.ts";
import type { InboxMessage } from "../store/spi.ts";
import type { MiddlewareContext } from "../effects/effect.ts";
import type { PriceTable } from "../kernel/prices.ts";
import type { DeltaBus } from "../effects/deltas.ts";
import type { Flow } from "./contract.ts";
import type { Run } from "./run.ts";

/** What the runtime gives the child syscalls. */
export interface ChildDeps {
  flow(name: string): Flow | undefined;
  /** O1: writes the child's sequence 0 as its parent's record says (idempotent), and drives it. */
  startChild(parent: ExecutionState, childId: string): Promise<void>;
  /** How the chain `childId` heads ended (routed), or undefined while it runs. */
  childOutcome(childId: string): Promise<ChildOutcome | undefined>;
  /** O7: whether `childId` was spawned by a member of the chain `chainId`. */
  spawnedInChain(childId: string, chainId: string): Promise<boolean>;
}

export interface ContextDeps {
  limits: Limits;
  now(): number;
  /** A topic's messages in a chain's inbox past `afterSeq` (one batch). */
  readInbox(chainId: string, topic: string, afterSeq: number): Promise<InboxMessage[]>;
  /** The outside ceilings of `ctx.negotiateBudget` (RuntimeOptions.negotiation, issue 20). */
  negotiation: Readonly<Record<string, { ceiling: number }>>;
  /** Prices by model name (RuntimeOptions.prices): each step's `ectx.prices`. */
  prices: PriceTable;
  /** This runtime's live deltas (effects/deltas.ts D1): each step's `ectx.publishDelta`. */
  deltas: DeltaBus;
  /** The largest carry `continueAsNew` takes (bytes of JSON text). */
  maxCarryBytes: number;
  /** Rotates the run to its successor (undefined while `features.continueAsNew` is off). */
  rotate: ((run: Run, carry: Json | undefined) => void) | undefined;
  /** What children need from the runtime (children.ts); undefined where nothing supervises. */
  children?: ChildDeps;
  /** The effect middleware chain, composed (see effects/middleware.ts). */
  chain: (ctx: MiddlewareContext) => Promise<unknown>;
}
