/**
 * `loom show <id> [--json]`: an execution's folded state and a readable timeline of its log.
 * With `--json` it prints `{ state, events }`: the folded state and the log's envelopes.
 *
 * `--step NAME`: one call in full (analytics/step-detail.ts): NAME is a call id (`search#1`), or
 * a step name, which shows every call of that name in the order they were made. With `--json`,
 * a call id prints its StepDetail, a name an array of them.
 * `--llm`: the execution's LLM calls as conversations (analytics/conversation.ts), in call order;
 * with `--json`, an array of `{ callId, status, ...Conversation }`.
 */
import type { Command } from "../args.ts";
import { formatShow } from "../format.ts";
import { formatConversation, formatStep } from "../format-call.ts";
import { CliError } from "../cli-error.ts";
import { stepDetail, type StepDetail } from "../../analytics/step-detail.ts";
import type { Envelope } from "../../kernel/events.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";
import { chainLineageOfStates, type ChainLineage } from "../../analytics/chain-lineage.ts";
import { childTree, type ChildTree } from "../../analytics/child-tree.ts";
import { isLoomError } from "../../kernel/errors.ts";
import { callFrame, callsOf } from "../../fold/settled.ts";
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

/** At most this many executions are read for the children tree. */
const MAX_SHOWN_CHILDREN = 1000;

/**
 * The children tree under the shown execution (issue 8): the states of its children, their
 * chains' generations (a continued child is shown by its head) and their children, read until
 * MAX_SHOWN_CHILDREN states; projected by childTree.
 */
async function childrenOfShown(runtime: Runtime, state: ExecutionState): Promise<ChildTree> {
  const states = new Map([[state.executionId, state]]);
  const queue = Object.keys(state._children ?? {});
  while (queue.length > 0 && states.size < MAX_SHOWN_CHILDREN) {
    const id = queue.shift();
    if (id === undefined || states.has(id)) continue;
    const got = await runtime.getState(id).catch((e: unknown) => {
      if (isLoomError(e, "LOOM_NOT_FOUND")) return undefined;
      throw e;
    });
    if (!got) continue;
    states.set(id, got);
    if (got._continuedTo !== undefined) queue.unshift(got._continuedTo);
    queue.push(...Object.keys(got._children ?? {}));
  }
  return childTree(states, state.executionId);
}

type ShowCommand = Extract<Command, { name: "show" }>;

export async function showCommand(cmd: ShowCommand, io: Io): Promise<number> {
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    const state = await runtime.getState(cmd.id);
    const events = await runtime.readLog(cmd.id);
    if (cmd.step !== undefined) return showStep(cmd, cmd.step, state, events, io);
    if (cmd.llm === true) return showLlm(cmd, state, events, io);
    const lineage = await chainOfShown(runtime, state);
    const tree = await childrenOfShown(runtime, state);
    if (cmd.json) {
      const extra = {
        ...(lineage ? { chain: lineage } : {}),
        ...(tree.children.length > 0 || tree.parent ? { children: tree } : {}),
      };
      io.out(JSON.stringify({ state, events, ...extra }, null, 2));
    } else {
      io.out(formatShow(state, events, lineage, tree));
    }
    return 0;
  } finally {
    await runtime.close();
  }
}

/** Every call's detail, in the order the calls were made (their first event). */
function detailsOf(state: ExecutionState, events: readonly Envelope[]): StepDetail[] {
  const details: StepDetail[] = [];
  for (const [callId] of callsOf(state)) {
    const d = stepDetail(events, state, callId);
    if (d) details.push(d);
  }
  const first = (d: StepDetail) => d.seqs[0] ?? d.startedAtMs ?? 0;
  return details.sort((a, b) => first(a) - first(b));
}

function showStep(
  cmd: ShowCommand,
  name: string,
  state: ExecutionState,
  events: readonly Envelope[],
  io: Io,
): number {
  if (callFrame(state, name) !== undefined) {
    const d = stepDetail(events, state, name) as StepDetail;
    io.out(cmd.json ? JSON.stringify(d, null, 2) : formatStep(cmd.id, d));
    return 0;
  }
  const all = detailsOf(state, events);
  const named = all.filter((d) => d.name === name);
  if (named.length === 0) {
    const ids = all.map((d) => d.callId);
    const known = ids.length === 0 ? "it has none" : `its calls: ${ids.join(", ")}`;
    throw new CliError(`execution "${cmd.id}" has no call or step named "${name}" (${known})`);
  }
  if (cmd.json) io.out(JSON.stringify(named, null, 2));
  else {
    const head = `${named.length} call${named.length === 1 ? "" : "s"} of step "${name}": ${named.map((d) => d.callId).join(", ")}`;
    io.out([head, ...named.map((d) => formatStep(cmd.id, d))].join("\n\n"));
  }
  return 0;
}

function showLlm(
  cmd: ShowCommand,
  state: ExecutionState,
  events: readonly Envelope[],
  io: Io,
): number {
  const calls = detailsOf(state, events).filter((d) => d.llm !== undefined);
  if (cmd.json) {
    const out = calls.map((d) => ({ callId: d.callId, status: d.status, ...d.llm }));
    io.out(JSON.stringify(out, null, 2));
  } else if (calls.length === 0) {
    io.out(`execution "${cmd.id}" made no LLM call`);
  } else {
    const blocks = calls.map((d) => {
      const text = d.llm === undefined ? "" : formatConversation(d.callId, d.llm);
      return d.status === "completed" ? text : `${text}\n  status: ${d.status}`;
    });
    io.out(blocks.join("\n\n"));
  }
  return 0;
}
