/**
 * The chain inbox in the memory store (S12): one array per chain, whose index is the message's
 * sequence number, so numbers are dense from 0 and a call, which runs whole on the JavaScript
 * thread, takes the next one alone. Payloads are stored and read back as copies; an append wakes
 * the fleet (S18).
 */
import { jsonText, type Json } from "../../kernel/json.ts";
import type { InboxMessage, InboxStore } from "../spi.ts";
import { live, wake, type Handle } from "./data.ts";

export function memoryInbox(h: Handle): InboxStore {
  const { data } = h;
  return {
    async appendMessage(chainId, message) {
      live(h);
      const stream = data.inbox.get(chainId) ?? [];
      const seq = stream.length;
      stream.push({
        ...message,
        chainId,
        seq,
        payload: JSON.parse(jsonText(message.payload)) as Json,
      });
      data.inbox.set(chainId, stream);
      wake(h, () => [{ kind: "message", chainId }]);
      return seq;
    },

    async readMessages(chainId, topic, afterSeq, limit) {
      live(h);
      const stream = data.inbox.get(chainId) ?? [];
      const out: InboxMessage[] = [];
      for (let i = Math.max(0, afterSeq + 1); i < stream.length && out.length < limit; i++) {
        const m = stream[i];
        if (m?.topic === topic)
          out.push({ ...m, payload: JSON.parse(jsonText(m.payload)) as Json });
      }
      return out;
    },
  };
}
