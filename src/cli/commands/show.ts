/**
 * `loom show <id> [--json]`: an execution's folded state and a readable timeline of its log.
 * With `--json` it prints `{ state, events }`: the folded state and the log's envelopes.
 */
import type { Command } from "../args.ts";
import { formatShow } from "../format.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";
import { chainLineageOfStates, type ChainLineage } from "../../analytics/chain-lineage.ts";
import { isLoomError } from "../../kernel/errors.ts";
import { chainOf, type ExecutionState } from "../../fold/state.ts";
import type { Runtime } from "../../runtime/runtime.ts";

/** At most this many generations are read for a chain's lineage. */
const MAX_SHOWN_GENERATIONS = 10_000;

/**
 * The generations of the chain the shown execution belongs to (ADR 0109 D6), when it has more
 * than one: read back from the shown one and then forward, each until a generation has no log
 * (retention releases some). States, not logs: a compacted generation folds from its snapshot.
 */
async function chainOfShown(
  runtime: Runtime,
  state: ExecutionState,
): Promise<ChainLineage | undefined> {
  const { chainId, generation } = chainOf(state);
  if (generation === 0 && state.status !== "continued") return undefined;
  const states = new Map([[state.executionId, state]]);
  const load = async (n: number): Promise<boolean> => {
    const id = n === 0 ? chainId : `${chainId}~${n}`;
    const got = await runtime.getState(id).catch((e: unknown) => {
      if (isLoomError(e, "LOOM_NOT_FOUND")) return undefined;
      throw e;
    });
    if (got) states.set(id, got);
    return got !== undefined;
  };
  for (let n = generation - 1; n >= 0 && states.size < MAX_SHOWN_GENERATIONS; n--) {
    if (!(await load(n))) break;
  }
  for (let n = generation + 1; states.size < MAX_SHOWN_GENERATIONS; n++) {
    if (!(await load(n))) break;
  }
  return chainLineageOfStates(states, state.executionId);
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
