/**
 * The SQLite store's hot events table: where appends land, and how they settle.
 *
 * H1. Appends land in `events_hot`, ordered by arrival, so a group commit of many executions
 *     dirties a few pages instead of one per execution; every SETTLE_AT_ROWS rows (counted by this
 *     connection) they move to `events`, clustered by execution, in one transaction that writes
 *     each execution's page once. Reads see both tables (statements.ts Q1).
 * H2. Settling is best effort: the appends it follows are committed whatever happens here. A move
 *     that fails (busy past the timeout, a full disk) is tried again after another SETTLE_AT_ROWS
 *     rows.
 */
import type Database from "better-sqlite3";
import type { AppendBatch, AppendOutcome } from "../spi.ts";
import type { Statements } from "./statements.ts";

const SETTLE_AT_ROWS = 4000;

/** Counts the rows `appendMany` committed to `events_hot`; settles them past the mark (H1). */
export type HotEvents = (batches: readonly AppendBatch[], outcomes: AppendOutcome[]) => void;

export function hotEvents(db: Database.Database, q: Statements): HotEvents {
  let hotRows = q.hotCount.get()?.n ?? 0;
  const settleTx = db.transaction(() => {
    q.settle.run();
    q.clearHot.run();
  });
  let settleAt = SETTLE_AT_ROWS;
  /** H2. */
  function settleHot(): void {
    try {
      settleTx.immediate();
      hotRows = 0;
      settleAt = SETTLE_AT_ROWS;
    } catch {
      settleAt = hotRows + SETTLE_AT_ROWS;
    }
  }
  return (batches, outcomes) => {
    batches.forEach((b, i) => {
      if (outcomes[i]?.ok) hotRows += b.events.length;
    });
    if (hotRows >= settleAt) settleHot();
  };
}
