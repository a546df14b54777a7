/**
 * Which listed executions have a log that cannot be read (issue 21 item 3): what `loom ls` and
 * the dashboard's list show beside each such execution. A store's `list` reads no event, so it
 * lists an execution whose log has a spoiled row like any other; this reads each listed log, a
 * page at a time, and gives the summary of one that fails its LogCorruptError as `error`.
 *
 * Invariants:
 * E1. Only LogCorruptError and CodecKeyError mark a summary; any other failure (the store is
 *     down) is thrown.
 * E2. A summary of a readable log is returned as it was, with no `error` key.
 * E3. A log sealed with a key the reader does not have (CodecKeyError) is listed, marked with
 *     that error, which names the codec and the key id and nothing of the payloads: a reader
 *     without the keys sees that the execution exists and is sealed, never what it holds.
 */
import { isLoomError } from "../kernel/errors.ts";
import type { ExecutionSummary, Store } from "./spi.ts";

/** Events read per page of one log. */
const PAGE = 500;

export async function withLogErrors(
  store: Pick<Store, "read">,
  rows: readonly ExecutionSummary[],
): Promise<ExecutionSummary[]> {
  const out: ExecutionSummary[] = [];
  for (const row of rows) {
    try {
      await readAll(store, row.executionId);
      out.push(row);
    } catch (e) {
      const corrupt = isLoomError(e, "LOOM_LOG_CORRUPT");
      if (!corrupt && !isLoomError(e, "LOOM_CODEC_KEY")) throw e; // E1
      const name = corrupt ? "LogCorruptError" : "CodecKeyError"; // E3
      const error = { name, code: e.code, message: e.message };
      out.push({
        ...row,
        error: e.details === undefined ? error : { ...error, details: e.details },
      });
    }
  }
  return out;
}

async function readAll(store: Pick<Store, "read">, id: string): Promise<void> {
  let from = 0;
  for (;;) {
    const page = await store.read(id, from, PAGE);
    const last = page.at(-1);
    if (page.length < PAGE || !last) return;
    from = last.seq + 1;
  }
}
