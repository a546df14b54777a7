/**
 * What an A2A call (a2a.ts) does about the tasks that earlier attempts of its step started and
 * never followed to their end: the owner died mid-call (a SIGKILL, a lost machine), and the task
 * runs on at the agent. Its id was noted in the step's log (EffectContext.note), so the attempt
 * that recovers the call knows it (issue 21 item 8).
 *
 * Invariants:
 * O1. A call notes its task's id (`{ a2aTask: id }`, a STEP_NOTED) as soon as the agent names it,
 *     before it reads any further; a task the call answers (its input's `taskId`) is the flow's
 *     from before the call and is not noted.
 * O2. A call's orphans are the tasks earlier attempts of its step noted, oldest first, without
 *     the task its input answers.
 * O3. `orphans: "cancel"` (the default): each orphan is cancelled, within `cancelTimeoutMs` in all,
 *     before the message is sent again (under the same message id). A cancel that fails (the task
 *     ended meanwhile, the agent does not answer in time) does not stop the call.
 * O4. `orphans: "resubscribe"`: the latest orphan is followed to its end (its state read with
 *     `getTask`, then its stream, or polls where the agent does not stream) and nothing is sent;
 *     the others are cancelled as in O3. An orphan the agent cannot report (`getTask` fails: it
 *     forgot the task, say) is cancelled as in O3 and the message sent as a fresh call's.
 */
import type { StreamResponse, Task } from "@a2a-js/sdk";
import { abortableDelay } from "../effects/delay.ts";
import type { EffectContext } from "../effects/effect.ts";
import { cardOf, clientFor, fetchFor, streamed, type A2ASdk, type Agent } from "./a2a-sdk.ts";
import type { TaskView } from "./a2a-task-view.ts";

/** The key a call's task id is noted under (O1). */
export const NOTE_KEY = "a2aTask";

/** O1: notes the call's task once its id is known, unless the call answers that task. */
export async function noteTask(view: TaskView, ectx: EffectContext): Promise<void> {
  if (view.noted || view.continuing || view.taskId === undefined) return;
  view.noted = true;
  await ectx.note?.({ [NOTE_KEY]: view.taskId });
}

/** O2: the tasks earlier attempts of this step noted, oldest first, without `answering`. */
export function orphansOf(ectx: EffectContext, answering: string | undefined): string[] {
  const ids: string[] = [];
  for (const { attempt, note } of ectx.notes ?? []) {
    const id = note[NOTE_KEY];
    if (attempt >= ectx.attempt || typeof id !== "string" || id === answering) continue;
    if (!ids.includes(id)) ids.push(id);
  }
  return ids;
}

/**
 * O3, O4: settles the orphans before the call sends anything. True when the call is answered by
 * following the latest orphan (O4), false when the message is to be sent.
 */
export async function settleOrphans(
  agent: Agent,
  sdk: A2ASdk,
  orphans: string[],
  view: TaskView,
  signal: AbortSignal,
  ectx: EffectContext,
): Promise<boolean> {
  const latest = agent.orphans === "resubscribe" ? orphans.at(-1) : undefined;
  await cancelTasks(agent, sdk, latest === undefined ? orphans : orphans.slice(0, -1), ectx);
  if (latest === undefined) return false;
  const followed = await follow(agent, sdk, latest, view, signal, ectx);
  if (!followed) await cancelTasks(agent, sdk, [latest], ectx);
  return followed;
}

/** O3: cancels each task, best effort, within `cancelTimeoutMs` in all (not the step's signal). */
export async function cancelTasks(
  agent: Agent,
  sdk: A2ASdk,
  ids: readonly string[],
  ectx: EffectContext,
): Promise<void> {
  if (ids.length === 0) return;
  const deadline = AbortSignal.timeout(agent.cancelTimeoutMs);
  const fetchImpl = fetchFor(deadline, ectx);
  try {
    const client = await clientFor(sdk, await cardOf(agent, sdk, fetchImpl), fetchImpl);
    for (const id of ids) {
      if (deadline.aborted) return;
      await client.cancelTask({ tenant: "", id, metadata: undefined }).catch(() => undefined);
    }
  } catch {
    // The agent's card could not be read in time: there is nothing to cancel with.
  }
}

/** O4: follows `taskId` until it ends or asks for input; false when the agent cannot report it. */
async function follow(
  agent: Agent,
  sdk: A2ASdk,
  taskId: string,
  view: TaskView,
  signal: AbortSignal,
  ectx: EffectContext,
): Promise<boolean> {
  const fetchImpl = fetchFor(signal, ectx);
  const card = await cardOf(agent, sdk, fetchImpl);
  const client = await clientFor(sdk, card, fetchImpl);
  const read = () => client.getTask({ tenant: "", id: taskId, historyLength: 0 }, { signal });
  let task: Task;
  try {
    task = await read();
  } catch (e) {
    if (signal.aborted) throw e;
    return false;
  }
  view.follow(taskId);
  view.see(task$(task));
  if (view.done) return true;
  if (streamed(agent, card)) {
    try {
      for await (const event of client.resubscribeTask({ tenant: "", id: taskId }, { signal })) {
        view.see(event);
        if (view.done) return true;
      }
    } catch (e) {
      // The task may have ended between the read and the subscription, and an agent refuses a
      // subscription to an ended task: the read below tells.
      if (signal.aborted) throw e;
    }
    view.see(task$(await read()));
    if (view.done) return true;
    throw new Error(`the agent's stream of task ${view.describe()} ended before the task did`);
  }
  while (!view.done) {
    await abortableDelay(agent.pollIntervalMs, signal);
    view.see(task$(await read()));
  }
  return true;
}

export const task$ = (value: Task): StreamResponse => ({ payload: { $case: "task", value } });
