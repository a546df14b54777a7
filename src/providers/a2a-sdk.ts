/**
 * The seam to `@a2a-js/sdk` for the A2A effect (a2a.ts): the SDK loaded on first use, a client for
 * an agent's card over metered fetches, and the message one call sends.
 *
 * Invariants (a2a.ts 1, 5, 6): the SDK is an optional peer that only `loadA2A` imports, once per
 * process (importing this module loads none of it); every request goes through `meteredFetch`;
 * a call's message carries the step's idempotency key as its `messageId`.
 */
import type { AgentCard, Message, Part } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { InvalidInputError } from "../kernel/errors.ts";
import { meteredFetch } from "../effects/fetch.ts";
import type { EffectContext } from "../effects/effect.ts";
import { importPeer } from "../peers.ts";
import type { A2AInput } from "./a2a-contract.ts";

export const SDK = "@a2a-js/sdk";
export const FEATURE = "loomwork/a2a";

/** The SDK's two modules, each imported once per process (peers.ts P2). */
export const loadA2A = () =>
  Promise.all([
    importPeer<typeof import("@a2a-js/sdk")>(SDK, FEATURE),
    importPeer<typeof import("@a2a-js/sdk/client")>(`${SDK}/client`, FEATURE, SDK),
  ]).then(([core, client]) => ({ core, client }));
export type A2ASdk = Awaited<ReturnType<typeof loadA2A>>;

/** The message of one call (1): the step's idempotency key is its `messageId`. */
export function userMessage(sdk: A2ASdk, input: A2AInput, ectx: EffectContext): Message {
  const { text, contextId, taskId } = (input ?? {}) as Partial<A2AInput>;
  if (typeof text !== "string") throw new InvalidInputError("an A2A call needs { text: string }");
  for (const [k, v] of Object.entries({ contextId, taskId })) {
    if (v !== undefined && typeof v !== "string") {
      throw new InvalidInputError(`an A2A call's ${k} must be a string`);
    }
  }
  const part: Part = {
    content: { $case: "text", value: text },
    metadata: undefined,
    filename: "",
    mediaType: "text/plain",
  };
  return {
    messageId: ectx.idempotencyKey,
    contextId: contextId ?? "",
    taskId: taskId ?? "",
    role: sdk.core.Role.ROLE_USER,
    parts: [part],
    metadata: { loomAttempt: ectx.attempt },
    extensions: [],
    referenceTaskIds: [],
  };
}

export type Metered = Pick<EffectContext, "meter">;

/** What one effect keeps across its calls: its checked options, and the agent's card once read. */
export interface Agent {
  url: string;
  stream: boolean | undefined;
  pollIntervalMs: number;
  cancelTimeoutMs: number;
  orphans: "cancel" | "resubscribe";
  card: AgentCard | undefined;
}

/** The agent's card, read once per effect (from `.well-known/agent-card.json` under its url). */
export async function cardOf(
  agent: Agent,
  sdk: A2ASdk,
  fetchImpl: typeof fetch,
): Promise<AgentCard> {
  agent.card ??= await new sdk.client.DefaultAgentCardResolver({ fetchImpl }).resolve(agent.url);
  return agent.card;
}

/** Whether calls read the task as a stream: the card says it can, and the effect did not say no. */
export function streamed(agent: Agent, card: AgentCard): boolean {
  return agent.stream !== false && card.capabilities?.streaming === true;
}

/** Every request of a call is metered (`netBytes`) and stops on `signal`. */
export function fetchFor(signal: AbortSignal, ectx: Metered): typeof fetch {
  return meteredFetch({ signal, meter: (delta) => ectx.meter(delta) });
}

export function clientFor(sdk: A2ASdk, card: AgentCard, fetchImpl: typeof fetch): Promise<Client> {
  const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } =
    sdk.client;
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [
      new JsonRpcTransportFactory({ fetchImpl }),
      new RestTransportFactory({ fetchImpl }),
    ],
    preferredTransports: ["JSONRPC"],
  });
  return new ClientFactory(options).createFromAgentCard(card);
}
