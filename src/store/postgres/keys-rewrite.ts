/**
 * The keys table's rewrite after a destroy (keys.ts K2, K3, K5): `VACUUM (FULL, VERBOSE)` on a
 * connection of the pool, outside any transaction, waiting for the table's lock at most `waitMs`,
 * and what the server said of it.
 *
 * KR1. The scrub is confirmed only when the server's report of the rewrite says that 0 dead row
 *      versions could not be removed yet: a deleted row a reader may still see is copied into
 *      the new file, and the report counts it. Without that report (a lock not granted in time,
 *      a report in another language), it is not confirmed.
 * KR2. The connection's `lock_timeout` is set for the rewrite and reset before it goes back to
 *      the pool; a connection that failed meanwhile is dropped, not given back.
 */
import type pg from "pg";
import { pgCode } from "./db.ts";

/** The server's report of a rewrite: `"<table>": found N removable, M nonremovable row versions`. */
const FOUND = /found \d+ removable, \d+ nonremovable row versions/;
/** Its detail: how many deleted rows it had to keep, since a reader may still see them. */
const KEPT_DEAD = /^(\d+) dead row versions cannot be removed yet/;
/** PostgreSQL's lock_not_available: `lock_timeout` passed. */
const LOCK_NOT_AVAILABLE = "55P03";

/** KR1: rewrites `table`; undefined when the scrub is confirmed, else why it is not. */
export async function rewriteKeys(
  pool: pg.Pool,
  table: string,
  waitMs: number,
): Promise<string | undefined> {
  const client = await pool.connect();
  const reports: { message: string; detail?: string | undefined }[] = [];
  const onNotice = (n: { message?: string; detail?: string | undefined }) =>
    reports.push({ message: n.message ?? "", detail: n.detail });
  client.on("notice", onNotice);
  let broken: Error | undefined;
  try {
    await client.query(`SET lock_timeout = ${Math.ceil(waitMs)}`);
    const locked = await client.query(`VACUUM (FULL, VERBOSE) ${table}`).then(
      () => false,
      (e: unknown) => {
        if (pgCode(e) === LOCK_NOT_AVAILABLE) return true;
        throw e;
      },
    );
    await client.query("RESET lock_timeout");
    if (locked) {
      return `a session held a lock on the keys table for the whole wait (${Math.ceil(waitMs)} ms), so the table was not rewritten and the deleted key's bytes may still be in its file; erase again once that session ends`;
    }
  } catch (e) {
    // KR2: a connection whose setting may not have been reset is not given back to the pool.
    broken = e instanceof Error ? e : new Error(String(e));
    throw e;
  } finally {
    client.off("notice", onNotice);
    client.release(broken);
  }
  return verdict(reports);
}

function verdict(reports: readonly { message: string; detail?: string | undefined }[]) {
  const report = reports.find((r) => FOUND.test(r.message));
  const kept = report?.detail?.match(KEPT_DEAD)?.[1];
  if (kept === undefined) {
    return "the server did not report how many deleted rows the keys table's rewrite kept (its messages may not be in English), so the key's bytes could not be confirmed gone";
  }
  if (Number(kept) > 0) {
    return `a reader still held a snapshot older than the delete after the wait, so the keys table's rewrite kept ${kept} deleted row version(s) in its file; erase again once that reader's transaction ends`;
  }
  return undefined;
}
