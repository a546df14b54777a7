/**
 * `loom show <id> [--json]`: an execution's folded state and a readable timeline of its log.
 * With `--json` it prints `{ state, events }`: the folded state and the log's envelopes.
 */
import type { Command } from "../args.ts";
import { formatShow } from "../format.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";
import { chainLineage, type ChainLineage } from "../../analytics/chain-lineage.ts";
import { chainOf, type ExecutionState } from "../../fold/state.ts";
import type { Runtime } from "../../runtime/runtime.ts";

/**
 * The generations of the chain the shown execution belongs to (ADR 0109 D6), when it has more
 * than one: read from generation 0 forward until a generation has no log.
 */
async function chainOfShown(
  runtime: Runtime,
  state: ExecutionState,
): Promise<ChainLineage | undefined> {
  const { chainId, generation } = chainOf(state);
  if (generation === 0 && state.status !== "continued") return undefined;
  const events = [];
  for (let n = 0; n < 10_000; n++) {
    const log = await runtime.readLog(n === 0 ? chainId : `${chainId}~${n}`);
    if (log.length === 0) break;
    events.push(...log);
  }
  return chainLineage(events, state.executionId);
}

type ShowCommand = Extract<Command, { name: "show" }>;

export async function showCommand(cmd: ShowCommand, io: Io): Promise<number> {
  const runtime = openRuntime(cmd.db, io.cwd, { background: false, mustExist: true });
  try {
    const state = await runtime.getState(cmd.id);
    const events = await runtime.readLog(cmd.id);
    const lineage = await chainOfShown(runtime, state);
    if (cmd.json) {
      io.out(JSON.stringify({ state, events, ...(lineage ? { chain: lineage } : {}) }, null, 2));
    } else {
      io.out(formatShow(state, events, lineage));
    }
    return 0;
  } finally {
    await runtime.close();
  }
}
