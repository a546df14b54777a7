/**
 * The at-rest forms the sealing store writes (sealed-store.ts V2, V7, V8), and the tests that
 * tell them apart from plain values: pure functions, no keys.
 *
 * A sealed event keeps its envelope and has the base64 of the sealed bytes as its payload, with
 * the codec and the key named in its meta. A sealed snapshot, message or schedule input is a
 * `SealedValue`: `{ $sealed: { codec, keyId, data } }`, `data` the base64 of the sealed bytes.
 */
import type { Envelope } from "../kernel/events.ts";
import { isPlainObject, jsonText, type Json } from "../kernel/json.ts";
import { aad } from "./codec.ts";

export interface SealedValue {
  $sealed: { codec: string; keyId: string; data: string };
}

/** V8: the codec name of a plain value escaped because it looks sealed. */
export const PLAIN = "plain";

/** V2: what an event's seal is bound to: its execution, sequence number and kind. */
export function eventAad(e: Envelope): string {
  return aad("event", e.executionId, e.seq, e.kind);
}

/** V7: what an erased start still says (none of it is the subject's data). */
export function identityOf(payload: Json, subject: string): Json {
  const p = isPlainObject(payload) ? payload : {};
  const out: Record<string, Json> = { subject };
  for (const k of ["flow", "flowVersion", "principal", "chainId", "generation", "parent"]) {
    const v = p[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/**
 * V8: a plain value that has the sealed form (a message anyone may send) is stored wrapped in it
 * under the `plain` codec, so it reads back as itself and is never taken for a sealed one.
 */
export function escaped(v: Json): Json {
  if (!isSealedValue(v)) return v;
  const data = Buffer.from(jsonText(v), "utf8").toString("base64");
  return { $sealed: { codec: PLAIN, keyId: "", data } };
}

/** Whether an event was sealed or stamped with the audit chain: a read must open it. */
export function isStamped(e: Envelope): boolean {
  const m = e.meta;
  return m !== undefined && (m.hash !== undefined || m.codec !== undefined);
}

export function isSealedValue(v: unknown): v is SealedValue {
  if (!isPlainObject(v) || Object.keys(v).length !== 1) return false;
  const s = v.$sealed;
  return (
    isPlainObject(s) &&
    typeof s.codec === "string" &&
    typeof s.keyId === "string" &&
    typeof s.data === "string"
  );
}
