/**
 * The simulator's watch over children (issue 8): it finds every execution of the child flow the
 * store lists (so a child written without its spawn is found too), checks each chain's children
 * against their parents as the chain moves (SIM12, SIM13, SIM15: child-invariants.ts), tells the
 * drain which children only a cascade may end (SIM14), and acts on children as the operator.
 */
import type { Runtime } from "../src/index.ts";
import type { Envelope } from "../src/kernel/events.ts";
import { foldAll } from "../src/fold/fold.ts";
import type { ExecutionState } from "../src/fold/state.ts";
import { openAttachedChildren } from "../src/fold/children.ts";
import { loadState } from "../src/runtime/load-state.ts";
import type { Store } from "../src/store/spi.ts";
import { readChain, type LogCache } from "./chain-read.ts";
import { checkChildDone, checkChildStart, checkSlots } from "./child-invariants.ts";
import { generationId, type ChainView } from "./invariants.ts";
import type { Prng } from "./prng.ts";
import { CHILD_FLOW } from "./workload.ts";

/** A child chain the store listed: what the checks learnt of it, and who spawned it. */
export interface ChildChain {
  /** How many generations a read has seen (at least 1). */
  known: number;
  /** SIM8: the length of each generation's log when its successor was first seen. */
  frozenAt: Map<number, number>;
  /** The generation that spawned it (its sequence 0's parent link). */
  parent?: string;
}

export class ChildWatch {
  /** Child chains, by their generation 0's id, in the order the store listed them. */
  readonly chains = new Map<string, ChildChain>();
  /** Executions of the child flow that are successors (their chain is the child). */
  private readonly successors = new Set<string>();
  /** CHILD_DONE events SIM15 has checked (against a child that had ended: for good). */
  private readonly verified = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly cache: LogCache,
    private readonly out: string[],
  ) {}

  /** Children the store has that the watch does not know yet. */
  async discover(): Promise<void> {
    for (const row of await this.store.list({ flow: CHILD_FLOW })) {
      const id = row.executionId;
      if (this.chains.has(id) || this.successors.has(id)) continue;
      const start = (await this.store.read(id, 0, 1))[0];
      if (!start) continue;
      const state = foldAll([start]);
      if (state._chain?.continuedFrom) {
        this.successors.add(id);
        continue;
      }
      const track: ChildChain = { known: 1, frozenAt: new Map() };
      if (state._parent) track.parent = state._parent.executionId;
      this.chains.set(id, track);
    }
  }

  /** SIM12 (for a child), SIM13 and SIM15 on one read of a chain; other logs read after it. */
  async check(view: ChainView): Promise<void> {
    checkSlots(view, this.out);
    for (const [n, log] of view.logs.entries()) {
      const id = generationId(view.chainId, n);
      for (const e of log) {
        if (e.kind !== "CHILD_DONE" || this.verified.has(`${id}@${e.seq}`)) continue;
        this.verified.add(`${id}@${e.seq}`);
        const childId = (e.payload as { childId?: unknown }).childId;
        if (typeof childId !== "string") continue;
        const known = this.chains.get(childId)?.known ?? 1;
        const child = await readChain(this.store, childId, known, this.cache, false);
        checkChildDone(id, e, child, this.out);
      }
    }
    const parent = this.chains.get(view.chainId)?.parent;
    if (parent !== undefined) checkChildStart(view, await this.logOf(parent), this.out);
  }

  /**
   * Whether `state` (a child's) must be ended by a cascade: it is attached, and its parent ended
   * cancelled or continued with its slot open. The drain leaves its suspends unanswered (SIM14).
   */
  async mustCascade(state: ExecutionState): Promise<boolean> {
    const link = state._parent;
    if (!link || link.detached) return false;
    const parent = await loadState(this.store, link.executionId);
    if (!parent || (parent.status !== "cancelled" && parent.status !== "continued")) return false;
    return openAttachedChildren(parent).includes(state._chain?.chainId ?? state.executionId);
  }

  /**
   * The operator's actions on children, drawn from `prng`, from `runtimes` (the operator's
   * process or the owner's): resume a child, cancel one, or cancel one's parent (routed to its
   * chain's head, so the cancel cascades).
   */
  operate(prng: Prng, runtimes: readonly [Runtime, Runtime], spawn: (p: Promise<unknown>) => void) {
    const known = [...this.chains.entries()];
    if (known.length === 0) return;
    const r = prng.next();
    const from = prng.chance(0.5) ? runtimes[0] : runtimes[1];
    const [id, track] = prng.pick(known);
    if (r < 0.1) spawn(from.resume(id, prng.int(1, 9)));
    else if (r < 0.13) spawn(from.cancel(id, "simulated operator"));
    else if (r < 0.17 && track.parent !== undefined) {
      spawn(from.cancel(track.parent, "simulated operator, to its children"));
    }
  }

  /** A log as it is now (read again only when its head moved). */
  private async logOf(id: string): Promise<readonly Envelope[]> {
    const cached = this.cache.get(id);
    if (cached?.length === (await this.store.head(id)) + 1) return cached;
    const log = await this.store.read(id);
    if (log.length > 0) this.cache.set(id, log);
    return log;
  }
}
