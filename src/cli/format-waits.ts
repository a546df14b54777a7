/**
 * `loom ls`'s columns of what waits (issue 26 item 4): with `--status queued`, QUEUE, KEY, POS and
 * EXPECTED; otherwise a WAITING column, only when some row waits in a queue or on a limiter (as
 * COST and TOKENS show only when some row spent). The words are analytics/waits.ts's W1, W2.
 */
import { formatWait, waitText, type WaitShown } from "../analytics/waits.ts";
import type { ExecutionSummary } from "../store/spi.ts";

/** Appends the wait columns to `table` (its first line the header, then one line per row). */
export function pushWaitColumns(
  table: string[][],
  rows: readonly ExecutionSummary[],
  waits: ReadonlyMap<string, WaitShown>,
  queuedView: boolean,
): void {
  const waitOf = (i: number): WaitShown | undefined => {
    const id = rows[i - 1]?.executionId;
    return id === undefined ? undefined : waits.get(id);
  };
  if (queuedView) {
    table.forEach((line, i) => {
      if (i === 0) return line.push("QUEUE", "KEY", "POS", "EXPECTED");
      const w = waitOf(i);
      const q = w?.kind === "queue" ? w : undefined;
      line.push(
        q?.queue ?? rows[i - 1]?.queue ?? "-",
        q?.key ?? "-",
        q === undefined ? "-" : String(q.position),
        formatWait(q?.expectedWaitMs),
      );
    });
    return;
  }
  if (!rows.some((r) => waits.has(r.executionId))) return;
  table.forEach((line, i) => {
    const w = waitOf(i);
    line.push(i === 0 ? "WAITING" : w === undefined ? "-" : waitText(w));
  });
}
