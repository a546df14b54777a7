/**
 * `loom ls [--status S[,S]] [--flow NAME] [--principal P] [--sort id|created|updated|cost]
 * [--limit N] [--after ID] [--json]`: the executions in the database, by id, or by cost (highest
 * first), creation or last update (newest first). `--limit N` shows the first N and `--after ID`
 * the ones after ID in id order, so `--after <the last id shown>` gives the next page; the table
 * then says on stderr how to get it. COST and TOKENS columns show when some row has spent.
 * What waits shows where it waits (runtime.waits(), issue 26 item 4): `--status queued` adds
 * QUEUE, KEY, POS (1 is admitted next) and EXPECTED; any other listing a WAITING column when
 * some row waits in a queue or on a rate limiter; `--json` a `waiting` field on those rows.
 */
import type { Command } from "../args.ts";
import { formatList, shellQuote } from "../format.ts";
import type { Io } from "../io.ts";
import { databaseFlags, openRuntime } from "../open-runtime.ts";
import { withLogErrors } from "../../store/log-errors.ts";
import type { ListQuery } from "../../store/spi.ts";
import type { WaitReason } from "../../runtime/verbs-flow-control.ts";

type LsCommand = Extract<Command, { name: "ls" }>;

/** The waiters read per queue for the positions shown (runtime.queues' most). */
const WAITERS_READ = 1000;

export async function lsCommand(cmd: LsCommand, io: Io): Promise<number> {
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    const query: ListQuery = {
      ...(cmd.status ? { status: cmd.status } : {}),
      ...(cmd.flow === undefined ? {} : { flow: cmd.flow }),
      ...(cmd.principal === undefined ? {} : { principal: cmd.principal }),
      // A sort other than the id's shows the most expensive, or the newest, first.
      ...(cmd.sort === undefined || cmd.sort === "id" ? {} : { sort: cmd.sort, order: "desc" }),
      ...(cmd.after === undefined ? {} : { afterId: cmd.after }),
      // One more than shown: whether a next page exists.
      ...(cmd.limit === undefined ? {} : { limit: cmd.limit + 1 }),
    };
    const found = await runtime.list(query);
    const shown = cmd.limit === undefined ? found : found.slice(0, cmd.limit);
    // A log that cannot be read is listed with its LogCorruptError (issue 21 item 3).
    const rows = await withLogErrors(runtime.store, shown);
    const waits =
      rows.length === 0
        ? new Map<string, WaitReason>()
        : await runtime.waits({ limit: WAITERS_READ });
    if (cmd.json) {
      const withWaits = rows.map((r) => {
        const waiting = waits.get(r.executionId);
        return waiting === undefined ? r : { ...r, waiting };
      });
      io.out(JSON.stringify(withWaits, null, 2));
      return 0;
    }
    const owners = new Map<string, string>();
    const now = Date.now();
    for (const r of rows) {
      const lease = await runtime.store.getLease(r.executionId);
      if (lease?.owner !== undefined && lease.expiresAtMs > now)
        owners.set(r.executionId, lease.owner);
    }
    const queuedView = cmd.status?.length === 1 && cmd.status[0] === "queued";
    io.out(formatList(rows, owners, waits, queuedView));
    const last = rows.at(-1);
    if (found.length > rows.length && last && (cmd.sort ?? "id") === "id") {
      io.err(`loom: more follow: ${nextPage(cmd, last.executionId)}`);
    }
    return 0;
  } finally {
    await runtime.close();
  }
}

/** The command line that lists the next page. */
function nextPage(cmd: LsCommand, lastId: string): string {
  const words = ["loom ls"];
  if (cmd.status) words.push(`--status ${cmd.status.join(",")}`);
  if (cmd.flow !== undefined) words.push(`--flow ${shellQuote(cmd.flow)}`);
  if (cmd.principal !== undefined) words.push(`--principal ${shellQuote(cmd.principal)}`);
  words.push(`--limit ${cmd.limit ?? 0}`, `--after ${shellQuote(lastId)}`);
  return `${words.join(" ")}${databaseFlags(cmd)}`;
}
