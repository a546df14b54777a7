/**
 * The dashboard's three writes, each one runtime call (the runtime checks and refuses; nothing
 * here appends):
 * - `POST /api/executions/:id/cancel` `{ reason? }` -> `runtime.cancel`: `{ cancelled }`, false
 *   when the execution had already ended.
 * - `POST /api/executions/:id/resume` `{ payload? }` -> `runtime.resume`: `{ resumed: true }`.
 * - `POST /api/executions/:id/send` `{ message, topic?, key? }` -> `runtime.send`:
 *   `{ chainId, seq }`.
 * A body that is not a JSON object, or a field of the wrong type, is a 400 before the call.
 */
import { isPlainObject, type Json } from "../kernel/json.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { HttpRefusal } from "./http.ts";

export type Action = "cancel" | "resume" | "send";

export const ACTIONS: readonly Action[] = ["cancel", "resume", "send"];

export async function runAction(
  runtime: Runtime,
  action: Action,
  id: string,
  body: unknown,
): Promise<Json> {
  if (!isPlainObject(body)) {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", `the body of ${action} must be a JSON object`);
  }
  const fields = body;
  switch (action) {
    case "cancel": {
      const reason = optionalText(fields, "reason");
      return { cancelled: await runtime.cancel(id, reason) };
    }
    case "resume":
      await runtime.resume(id, fields.payload);
      return { resumed: true };
    case "send": {
      if (!Object.hasOwn(fields, "message")) {
        throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "send needs a message");
      }
      const topic = optionalText(fields, "topic");
      const key = optionalText(fields, "key");
      const sent = await runtime.send(id, fields.message, {
        ...(topic === undefined ? {} : { topic }),
        ...(key === undefined ? {} : { key }),
      });
      return { chainId: sent.chainId, seq: sent.seq };
    }
  }
}

function optionalText(fields: { [key: string]: Json }, name: string): string | undefined {
  const v = fields[name];
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string") {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", `${name} must be a string`);
  }
  return v;
}
