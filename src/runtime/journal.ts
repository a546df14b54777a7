/**
 * The journal: group commit.
 *
 * Invariants:
 * J1. An append's promise settles only after the transaction holding it committed (or failed).
 * J2. Appends queued in the same turn of the event loop share one `appendMany` call, one
 *     transaction, whichever executions they belong to.
 * J3. Appends of one execution are handed to the store in the order they were queued;
 *     consecutive ones are merged into one batch, which stays atomic.
 */
import type { AppendBatch, Store } from "../store/spi.ts";
import type { IndexChanges } from "../fold/index-changes.ts";
import type { EventKind } from "../kernel/events.ts";
import type { Json } from "../kernel/json.ts";

export interface EventSpec {
  kind: EventKind;
  payload: Json;
  kernel?: true;
}

interface Pending {
  batch: AppendBatch;
  resolve: () => void;
  reject: (e: Error) => void;
}

export class Journal {
  private queue: Pending[] = [];
  private flushing: Promise<void> | undefined;
  private readonly beforeFlush = new Set<() => void>();
  private scheduled = false;
  /** Transactions issued; the benchmarks and tests read it. */
  commits = 0;
  /** Batches the store refused because their fence was stale (another owner took the lease). */
  fenced = 0;

  constructor(private readonly store: Store) {}

  append(batch: AppendBatch): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ batch, resolve, reject });
      this.schedule();
    });
  }

  /**
   * Calls `write` just before the next flush takes the queue, so what it appends then joins that
   * commit (a step's start, written only if the step is still running by then).
   */
  atNextFlush(write: () => void): void {
    this.beforeFlush.add(write);
    this.schedule();
  }

  /** Resolves when everything queued so far has been committed or refused. */
  async drain(): Promise<void> {
    while (this.queue.length > 0 || this.beforeFlush.size > 0 || this.flushing || this.scheduled) {
      await (this.flushing ?? new Promise<void>((r) => setImmediate(r)));
    }
  }

  private schedule(): void {
    if (this.scheduled || this.flushing) return;
    this.scheduled = true;
    setImmediate(this.startFlush);
  }

  /** The immediate's callback: made once (a flush runs twice a turn of a conversation). */
  private readonly startFlush = (): void => {
    // `scheduled` stays set while the flush runs its writers (synchronously, before its first
    // await): an append a writer makes joins this flush instead of scheduling a second one
    // beside it (one flush at a time).
    this.flushing = this.flushThenReschedule();
    this.scheduled = false;
  };

  private async flushThenReschedule(): Promise<void> {
    try {
      await this.flush();
    } finally {
      this.flushing = undefined;
      // A writer registered while this flush was in flight needs a flush of its own.
      if (this.queue.length > 0 || this.beforeFlush.size > 0) this.schedule();
    }
  }

  private async flush(): Promise<void> {
    if (this.beforeFlush.size > 0) {
      const writers = [...this.beforeFlush];
      this.beforeFlush.clear();
      for (const write of writers) write();
    }
    const items = this.queue;
    this.queue = [];
    const groups = mergeConsecutive(items);
    try {
      this.commits++;
      const outcomes = await this.store.appendMany(groups.map((g) => g.batch));
      groups.forEach((g, i) => {
        const outcome = outcomes[i];
        if (outcome?.ok === false && outcome.error.code === "LOOM_FENCED") this.fenced++;
        for (const item of g.items) {
          if (outcome?.ok) item.resolve();
          else item.reject(outcome ? outcome.error : new Error("store returned no outcome"));
        }
      });
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      for (const item of items) item.reject(error);
    }
  }
}

interface Group {
  batch: AppendBatch;
  items: Pending[];
}

function mergeConsecutive(items: Pending[]): Group[] {
  const only = items.length === 1 ? items[0] : undefined;
  if (only) return [{ batch: only.batch, items: [only] }];
  const open = new Map<string, Group>();
  const groups: Group[] = [];
  for (const item of items) {
    const b = item.batch;
    const g = open.get(b.executionId);
    if (
      g &&
      g.batch.expectedSeq + g.batch.events.length === b.expectedSeq &&
      g.batch.fence === b.fence &&
      !(g.batch.notice && b.notice)
    ) {
      const merged: AppendBatch = {
        ...g.batch,
        events: [...g.batch.events, ...b.events],
        status: b.status,
      };
      const index = mergeIndex(g.batch.index, b.index);
      if (index) merged.index = index;
      const snapshot = b.snapshot ?? g.batch.snapshot;
      if (snapshot) merged.snapshot = snapshot;
      const release = b.releaseLease ?? g.batch.releaseLease;
      if (release !== undefined) merged.releaseLease = release;
      const spent = b.spent ?? g.batch.spent;
      if (spent) merged.spent = spent;
      const queue = b.queue ?? g.batch.queue;
      if (queue) merged.queue = queue;
      const notice = b.notice ?? g.batch.notice;
      if (notice) merged.notice = notice;
      g.batch = merged;
      g.items.push(item);
      continue;
    }
    const fresh: Group = { batch: b, items: [item] };
    open.set(b.executionId, fresh);
    groups.push(fresh);
  }
  return groups;
}

function mergeIndex(
  a: IndexChanges | undefined,
  b: IndexChanges | undefined,
): IndexChanges | undefined {
  if (!a) return b;
  if (!b) return a;
  if (b.clearAllTimers) return b;
  const cleared = new Set(b.timersCleared);
  return {
    timersSet: [...a.timersSet.filter((t) => !cleared.has(t.timerId)), ...b.timersSet],
    timersCleared: [...a.timersCleared, ...b.timersCleared],
    clearAllTimers: a.clearAllTimers,
  };
}
