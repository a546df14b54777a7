/** `loom ls [--status S[,S]] [--json]`: the executions in the database, by id. */
import type { Command } from "../args.ts";
import { formatList } from "../format.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";

type LsCommand = Extract<Command, { name: "ls" }>;

export async function lsCommand(cmd: LsCommand, io: Io): Promise<number> {
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    const rows = await runtime.list(cmd.status ? { status: cmd.status } : {});
    const owners = new Map<string, string>();
    const now = Date.now();
    for (const r of rows) {
      const lease = await runtime.store.getLease(r.executionId);
      if (lease?.owner !== undefined && lease.expiresAtMs > now)
        owners.set(r.executionId, lease.owner);
    }
    io.out(cmd.json ? JSON.stringify(rows, null, 2) : formatList(rows, owners));
    return 0;
  } finally {
    await runtime.close();
  }
}
