/**
 * Pieces the fold's handlers share (fold.ts, children.ts): payload reading, frames and the call
 * order. Pure, like the fold; none of them throws.
 */
import type { ErrorData } from "../kernel/errors.ts";
import { isPlainObject, type Json } from "../kernel/json.ts";
import type { ExecutionState, Frame } from "./state.ts";

export type Payload = { [key: string]: Json };

export const str = (v: Json | undefined): v is string => typeof v === "string";

export function errorOf(v: Json | undefined): ErrorData {
  if (isPlainObject(v) && str(v.message)) {
    const data: ErrorData = {
      name: str(v.name) ? v.name : "Error",
      code: str(v.code) ? v.code : "LOOM_APPLICATION",
      message: v.message,
    };
    if (v.details !== undefined) data.details = v.details;
    return data;
  }
  return { name: "Error", code: "LOOM_APPLICATION", message: "unreadable recorded error" };
}

/** Registers a new call in its scope's order and returns false when the payload is unusable. */
export function callHead(p: Payload): { callId: string; scope: string; name: string } | undefined {
  const { callId, scope, name } = p;
  if (!str(callId) || !safeKey(callId) || !str(scope) || !str(name)) return undefined;
  if (scope !== "" && !safeKey(scope)) return undefined;
  return { callId, scope, name };
}

/** S5 (steps.ts): the scope and name a step's call id gives (`<scope><name>#<n>`), or undefined. */
export function stepHeadOf(callId: string): { scope: string; name: string } | undefined {
  const hash = callId.lastIndexOf("#");
  const slash = callId.lastIndexOf("/", hash);
  if (hash <= slash + 1) return undefined;
  return { scope: callId.slice(0, slash + 1), name: callId.slice(slash + 1, hash) };
}

/** Keys that would touch a prototype are never used as map keys. */
export function safeKey(key: string): boolean {
  return key !== "" && key !== "__proto__";
}

export function frameOf(s: ExecutionState, callId: Json | undefined): Frame | undefined {
  return str(callId) && Object.hasOwn(s.frames, callId) ? s.frames[callId] : undefined;
}

export function record(s: ExecutionState, scope: string, entry: string): void {
  if (Object.hasOwn(s.order, scope)) s.order[scope]?.push(entry);
  else s.order[scope] = [entry];
}

export function settleWait(s: ExecutionState): void {
  s.openWaits--;
}
