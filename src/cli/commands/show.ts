/**
 * `loom show <id> [--json]`: an execution's folded state and a readable timeline of its log.
 * With `--json` it prints `{ state, events }`: the folded state and the log's envelopes.
 */
import type { Command } from "../args.ts";
import { formatShow } from "../format.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";

type ShowCommand = Extract<Command, { name: "show" }>;

export async function showCommand(cmd: ShowCommand, io: Io): Promise<number> {
  const runtime = openRuntime(cmd.db, io.cwd, { background: false, mustExist: true });
  try {
    const state = await runtime.getState(cmd.id);
    const events = await runtime.readLog(cmd.id);
    io.out(cmd.json ? JSON.stringify({ state, events }, null, 2) : formatShow(state, events));
    return 0;
  } finally {
    await runtime.close();
  }
}
