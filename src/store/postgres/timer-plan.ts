/**
 * The net effect on timer rows of a batch (append.ts sends each batch's to the append routine),
 * or of several applied in order: each row once, set or deleted, with the same outcome as applying
 * the changes one by one (the SQLite store's way), so a statement never touches a row twice:
 *
 * T1. A row set or cleared last by a batch ends set or deleted, whatever came before it.
 * T2. A terminal batch (`clearAllTimers`) deletes every row of its execution, except wake rows
 *     (`child:`, `cascade:`, `watch:` ids: S15), also those no batch of this commit touched;
 *     rows its execution sets afterwards in the same commit survive.
 * T3. Another execution's wake rows (`index.wakes`) are written before the batch's own changes.
 */
import { isWakeId } from "../../fold/index-changes.ts";
import type { AppendBatch, DueTimer } from "../spi.ts";

interface Row {
  executionId: string;
  timerId: string;
  /** Undefined: deleted. */
  wakeAtMs: number | undefined;
}

export class TimerPlan {
  private readonly rows = new Map<string, Row>();
  /** Executions whose own non-wake rows are all deleted first (T2). */
  readonly clearedAll = new Set<string>();

  /** Adds an appended batch's changes (T1..T3). */
  add(b: AppendBatch): void {
    const ix = b.index;
    if (!ix) return;
    for (const w of ix.wakes ?? []) this.put(w.executionId, w.timerId, w.wakeAtMs);
    if (ix.clearAllTimers) {
      this.clearedAll.add(b.executionId);
      for (const row of this.rows.values()) {
        if (row.executionId === b.executionId && !isWakeId(row.timerId)) row.wakeAtMs = undefined;
      }
      return;
    }
    for (const t of ix.timersCleared) this.put(b.executionId, t, undefined);
    for (const t of ix.timersSet) this.put(b.executionId, t.timerId, t.wakeAtMs);
  }

  /** The rows that end set (upserted after the deletes). */
  get set(): DueTimer[] {
    return [...this.rows.values()].flatMap((r) =>
      r.wakeAtMs === undefined
        ? []
        : [{ executionId: r.executionId, timerId: r.timerId, wakeAtMs: r.wakeAtMs }],
    );
  }

  /** The rows that end deleted. */
  get deleted(): { executionId: string; timerId: string }[] {
    return [...this.rows.values()].filter((r) => r.wakeAtMs === undefined);
  }

  private put(executionId: string, timerId: string, wakeAtMs: number | undefined): void {
    // JSON of the pair: no separator a timer id could contain.
    this.rows.set(JSON.stringify([executionId, timerId]), { executionId, timerId, wakeAtMs });
  }
}
