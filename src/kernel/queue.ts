/**
 * An execution's place in a queue (issue 26), as EXECUTION_STARTED records it (schema 1.12.0):
 * the queue's name, the key its per-key concurrency counts, its priority (lower is admitted
 * first), a dedupe key and the time before which it is not admitted (a debounce's window).
 *
 * Q1. `readQueueMark` never throws: a malformed mark is absent (fold F2); a name must be a
 *     non-empty string, a priority a safe integer (default 0), the rest are dropped when
 *     malformed.
 */
import { isPlainObject, type Json } from "./json.ts";

export interface QueueMark {
  name: string;
  key?: string;
  priority: number;
  dedupe?: string;
  notBeforeMs?: number;
}

/** Q1: the mark `v` records, or undefined. */
export function readQueueMark(v: Json | undefined): QueueMark | undefined {
  if (!isPlainObject(v) || typeof v.name !== "string" || v.name === "") return undefined;
  const mark: QueueMark = {
    name: v.name,
    priority: typeof v.priority === "number" && Number.isSafeInteger(v.priority) ? v.priority : 0,
  };
  if (typeof v.key === "string" && v.key !== "") mark.key = v.key;
  if (typeof v.dedupe === "string" && v.dedupe !== "") mark.dedupe = v.dedupe;
  const notBefore = v.notBeforeMs;
  if (typeof notBefore === "number" && Number.isFinite(notBefore)) mark.notBeforeMs = notBefore;
  return mark;
}

/** The mark as JSON, for EXECUTION_STARTED's payload. */
export function queueMarkJson(mark: QueueMark): { [k: string]: Json } {
  const out: { [k: string]: Json } = { name: mark.name, priority: mark.priority };
  if (mark.key !== undefined) out.key = mark.key;
  if (mark.dedupe !== undefined) out.dedupe = mark.dedupe;
  if (mark.notBeforeMs !== undefined) out.notBeforeMs = mark.notBeforeMs;
  return out;
}
