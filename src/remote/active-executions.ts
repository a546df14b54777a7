/**
 * The executions dispatched to a worker server that have not settled, for `/health`'s `active`:
 * counted when asked, never watched, so a thousand suspended executions cost nothing between
 * two counts.
 *
 * Invariants (tests cite E1..E3):
 * E1. Nothing runs between counts: tracking an execution is adding its id to a set.
 * E2. A count looks only at the ids it tracks: one this runtime is running costs no read, any
 *     other one read of its state. A settled one is dropped, a continued one replaced by its
 *     chain's head, one that is gone (released by retention) dropped.
 * E3. One count runs at a time, and callers who ask meanwhile share it; the set also counts
 *     itself (pruning) when it has doubled since its last count. `close` waits for the count in
 *     flight and starts none after.
 */
import { ensureError, isLoomError } from "../kernel/errors.ts";
import type { Runtime } from "../runtime/runtime.ts";

/** How many tracked ids a count reads at once. */
const READS_AT_ONCE = 8;
/** A set this small is never pruned on its own (E3). */
const MIN_PRUNE_AT = 1024;

const SETTLED = new Set(["completed", "failed", "cancelled"]);

export class ActiveExecutions {
  private readonly ids = new Set<string>();
  private counting: Promise<number> | undefined;
  private pruneAt = MIN_PRUNE_AT;
  private closed = false;

  constructor(
    private readonly runtime: Runtime,
    private readonly report: (error: Error) => void,
  ) {}

  /** Tracks `id` until a count finds it settled (E1). */
  add(id: string): void {
    this.ids.add(id);
    if (this.ids.size >= this.pruneAt && !this.counting) {
      this.count().catch((e: unknown) => {
        if (!isLoomError(e, "LOOM_RUNTIME_CLOSED")) this.report(ensureError(e));
      });
    }
  }

  /** How many tracked executions have not settled, as the store says now (E2, E3). */
  count(): Promise<number> {
    if (this.closed) return Promise.resolve(this.ids.size);
    this.counting ??= this.recount().finally(() => {
      this.counting = undefined;
      this.pruneAt = Math.max(MIN_PRUNE_AT, this.ids.size * 2);
    });
    return this.counting;
  }

  /** Waits for the count in flight, if any, and starts none after (E3). */
  async close(): Promise<void> {
    this.closed = true;
    await this.counting?.catch(() => undefined);
  }

  private async recount(): Promise<number> {
    const queue = [...this.ids];
    const reader = async () => {
      for (let id = queue.pop(); id !== undefined; id = queue.pop()) await this.settle(id);
    };
    await Promise.all(Array.from({ length: READS_AT_ONCE }, reader));
    return this.ids.size;
  }

  /** Drops `id` when it has settled, following a continued chain to its head (E2). */
  private async settle(id: string): Promise<void> {
    if (this.closed) return;
    // Running here: active, no read needed. A parked run's memory may be stale (another process
    // may have cancelled it), so anything else is read from the store.
    const held = this.runtime.heldState(id)?.status;
    if (held === "running" || held === "pending") return;
    let status: string;
    try {
      status = (await this.runtime.getState(id)).status;
    } catch (e) {
      if (!isLoomError(e, "LOOM_NOT_FOUND")) throw e;
      this.ids.delete(id);
      return;
    }
    if (SETTLED.has(status)) this.ids.delete(id);
    if (status !== "continued") return;
    this.ids.delete(id);
    const head = await this.runtime.followToHead(id);
    if (head === id) return;
    this.ids.add(head);
    await this.settle(head);
  }
}
