/**
 * `createA2AEffect({ url })`: a message to a remote agent over A2A (`@a2a-js/sdk` 1.x client,
 * protocol 1.0, JSON-RPC preferred) as a Loom effect. The step records only the final result.
 *
 * 1. One message per attempt, its `messageId` the step's idempotency key, so a retried or re-run
 *    attempt reaches the agent under the same id (its metadata says which attempt it is).
 * 2. The task's id is learned from the agent's first answer, not only at its end: with streaming
 *    (the card's `capabilities.streaming`, unless `stream: false`) the task's events are read
 *    from `sendMessageStream`; without, the message is sent with `returnImmediately` and the task
 *    is polled with `getTask`.
 * 3. Aborting a request does not stop the remote task (the agent keeps it running for
 *    resubscription). On a cancel or past `timeoutMs`, the effect calls `cancelTask` for the task,
 *    under its own `cancelTimeoutMs` (not the aborted signal), and waits for it; if the task's id
 *    is not known yet, it first waits, within the same bound, for the agent's first answer. Then it
 *    throws the signal's reason (a cancel, a step timeout) or `A2ATimeoutError`. A call that fails
 *    midway (a cut stream) cancels the task it started the same way before it throws, so that a
 *    retry does not leave two running; a task the flow was answering is left alone then.
 * 4. `completed` returns. `input-required` and `auth-required` return too, with that state: the
 *    flow decides, and answers with the result's `taskId`. `failed` and `rejected` throw
 *    `A2ATaskFailedError`; `canceled`, when the effect did not ask for it, `A2ATaskCanceledError`.
 * 5. A2A reports no token usage. Every request goes through `meteredFetch`, so what is metered is
 *    `netBytes` (and, by the metering middleware, `wallMs`).
 * 6. After a crash mid-call, the task an earlier attempt started is cancelled before the message
 *    is sent again, or, with `orphans: "resubscribe"`, followed to its end instead: each call
 *    notes its task's id in the step's log as soon as the agent names it (a2a-orphans.ts).
 * 7. The SDK is an optional peer, loaded on first use: importing this module loads none of it,
 *    and creating the effect without it installed throws MissingDependencyError naming it.
 *
 * What a call takes, returns and throws is a2a-contract.ts's; the SDK seam (loading, clients,
 * the message) a2a-sdk.ts's; the task as the agent reports it a2a-task-view.ts's.
 */
import type { Message, SendMessageRequest, StreamResponse } from "@a2a-js/sdk";
import { InvalidInputError } from "../kernel/errors.ts";
import { abortableDelay, raceAbort, reasonOf } from "../effects/delay.ts";
import { checkedDuration } from "../kernel/limits.ts";
import type { Effect, EffectContext } from "../effects/effect.ts";
import { assertPeer } from "../peers.ts";
import { A2ATimeoutError, type A2AInput, type A2AResult } from "./a2a-contract.ts";
import { noteTask, orphansOf, settleOrphans, task$ } from "./a2a-orphans.ts";
import {
  FEATURE,
  SDK,
  cardOf,
  clientFor,
  fetchFor,
  loadA2A,
  streamed,
  userMessage,
  type A2ASdk,
  type Agent,
} from "./a2a-sdk.ts";
import { TaskView } from "./a2a-task-view.ts";

export {
  A2ATaskCanceledError,
  A2ATaskFailedError,
  A2ATimeoutError,
  type A2AInput,
  type A2AResult,
  type A2ATaskState,
} from "./a2a-contract.ts";

export interface A2AEffectOptions {
  /** The agent's base URL: its card is read from `.well-known/agent-card.json` under it. */
  url: string;
  /** The step's name (default "a2a"). */
  name?: string;
  /** Read the task as a stream (default: if the card says so); an agent that cannot is polled. */
  stream?: boolean;
  /** How long one call may take, until the task ends or asks for input. */
  timeoutMs?: number;
  /** How often a task is polled when it is not streamed (default 250 ms). */
  pollIntervalMs?: number;
  /** How long a cancel may wait for the agent (default 3000 ms). */
  cancelTimeoutMs?: number;
  /**
   * What a call recovered after a crash does with the task its crashed attempt left running at
   * the agent: `"cancel"` it before sending the message again (the default), or `"resubscribe"`
   * to it and take its answer, sending nothing (for agents whose tasks survive their caller).
   */
  orphans?: "cancel" | "resubscribe";
}

export type A2AEffect = Effect<A2AInput, A2AResult> & { close(): Promise<void> };

export function createA2AEffect(options: A2AEffectOptions): A2AEffect {
  const { url } = options;
  if (typeof url !== "string" || !/^https?:\/\//.test(url) || !URL.canParse(url)) {
    throw new InvalidInputError(
      `createA2AEffect needs the agent's http(s) url, got ${JSON.stringify(url)}`,
    );
  }
  if (options.stream !== undefined && typeof options.stream !== "boolean") {
    throw new InvalidInputError("createA2AEffect: stream must be true or false");
  }
  const timeoutMs = optionalDuration(options.timeoutMs, "timeoutMs");
  const pollIntervalMs = optionalDuration(options.pollIntervalMs, "pollIntervalMs") ?? 250;
  const cancelTimeoutMs = optionalDuration(options.cancelTimeoutMs, "cancelTimeoutMs") ?? 3000;
  const orphans = options.orphans ?? "cancel";
  if (orphans !== "cancel" && orphans !== "resubscribe") {
    throw new InvalidInputError(
      `createA2AEffect: orphans must be "cancel" or "resubscribe", got ${JSON.stringify(orphans)}`,
    );
  }
  assertPeer(SDK, FEATURE);
  const agent: Agent = {
    url,
    stream: options.stream,
    pollIntervalMs,
    cancelTimeoutMs,
    orphans,
    card: undefined,
  };

  return {
    name: options.name ?? "a2a",
    async run(input, ectx) {
      const sdk = await loadA2A();
      const message = userMessage(sdk, input, ectx);
      const answering = message.taskId || undefined;
      const view = new TaskView(answering);
      const orphans = orphansOf(ectx, answering);
      // The SDK's requests stop on `local`, not on the step's signal: after a cancel, the task's
      // id may still have to be read from the agent's first answer.
      const local = new AbortController();
      const timer = new AbortController();
      const timeout =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              const details = { url, timeoutMs, ...(view.taskId ? { taskId: view.taskId } : {}) };
              timer.abort(new A2ATimeoutError(`A2A call ran past ${timeoutMs} ms`, details));
            }, timeoutMs);
      const stop = AbortSignal.any([ectx.signal, timer.signal]);
      const working = (async () => {
        if (orphans.length > 0) {
          if (await settleOrphans(agent, sdk, orphans, view, local.signal, ectx)) return;
        }
        await exchange(agent, sdk, message, view, local.signal, ectx);
      })();
      try {
        await raceAbort(working, stop);
      } catch (e) {
        // A task this call started and will not follow any further is cancelled, lest a retry
        // run it twice; a task the flow answered is left alone unless the step itself stops.
        const stopped = stop.aborted;
        if (stopped || !view.continuing) await abandon(agent, sdk, view, working, local, ectx);
        throw stopped ? reasonOf(stop) : e;
      } finally {
        clearTimeout(timeout);
        local.abort();
      }
      return view.result(sdk);
    },
    async close() {
      agent.card = undefined;
    },
  };
}

/** One call: the message sent, then the task followed until it ends or asks for input. */
async function exchange(
  agent: Agent,
  sdk: A2ASdk,
  message: Message,
  view: TaskView,
  signal: AbortSignal,
  ectx: EffectContext,
) {
  const fetchImpl = fetchFor(signal, ectx);
  const card = await cardOf(agent, sdk, fetchImpl);
  const client = await clientFor(sdk, card, fetchImpl);
  const request = (returnImmediately: boolean): SendMessageRequest => ({
    tenant: "",
    message,
    configuration: {
      acceptedOutputModes: [],
      taskPushNotificationConfig: undefined,
      returnImmediately,
    },
    metadata: undefined,
  });
  view.sent = true;
  if (streamed(agent, card)) {
    for await (const event of client.sendMessageStream(request(false), { signal })) {
      view.see(event);
      await noteTask(view, ectx); // O1
      if (view.done) return;
    }
    throw new Error(`the agent's stream ended with its task ${view.describe()}`);
  }
  const first = await client.sendMessage(request(true), { signal });
  view.see("messageId" in first ? message$(first) : task$(first));
  await noteTask(view, ectx); // O1
  while (!view.done) {
    await abortableDelay(agent.pollIntervalMs, signal);
    const id = view.taskId ?? "";
    view.see(task$(await client.getTask({ tenant: "", id, historyLength: 0 }, { signal })));
  }
}

/** Stops the task the agent is running for this call, within `cancelTimeoutMs` in all. */
async function abandon(
  agent: Agent,
  sdk: A2ASdk,
  view: TaskView,
  working: Promise<void>,
  local: AbortController,
  ectx: EffectContext,
): Promise<void> {
  const deadline = AbortSignal.timeout(agent.cancelTimeoutMs);
  if (view.taskId === undefined && view.sent) {
    await Promise.race([view.known, working.catch(() => undefined), aborted(deadline)]);
  }
  local.abort();
  if (view.taskId === undefined || view.done || agent.card === undefined || deadline.aborted) {
    return;
  }
  try {
    const client = await clientFor(sdk, agent.card, fetchFor(deadline, ectx));
    await client.cancelTask({ tenant: "", id: view.taskId, metadata: undefined });
  } catch {
    // Best effort: the task may have ended meanwhile (TaskNotCancelableError), or the agent
    // may not answer in time; the call is abandoned either way.
  }
}

const message$ = (value: Message): StreamResponse => ({ payload: { $case: "message", value } });

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((r) => signal.addEventListener("abort", () => r(), { once: true }));
}

function optionalDuration(value: unknown, key: string): number | undefined {
  return value === undefined ? undefined : checkedDuration(value, `createA2AEffect ${key}`);
}
