/**
 * The fold of what only the kernel records of an execution as a whole: its end
 * (EXECUTION_COMPLETED, _FAILED, _CANCELLED, _CONTINUED), an erasure after it (SUBJECT_ERASED,
 * schema 1.8.0) and a restore of its replay record (STATE_RESTORED, schema 1.6.0).
 *
 * Invariants: each folds only from a kernel-stamped envelope (fold.ts F3; an app event that
 * borrows the name is inert); an erasure records its subject in `_erased` and changes nothing
 * else (F4); a restore replaces only what restored.ts R1 names.
 */
import { isTerminalEvent } from "../kernel/events.ts";
import { errorOf, str } from "./frames.ts";
import type { Handlers } from "./handler.ts";
import { applyRestored, readRestored } from "./restored.ts";

export const END_HANDLERS: Handlers = {
  EXECUTION_COMPLETED(s, p, e) {
    if (!isTerminalEvent(e)) return;
    s.status = "completed";
    if (p.output !== undefined) s.output = p.output;
  },
  EXECUTION_FAILED(s, p, e) {
    if (!isTerminalEvent(e)) return;
    s.status = "failed";
    s.error = errorOf(p.error);
  },
  EXECUTION_CANCELLED(s, p, e) {
    if (!isTerminalEvent(e)) return;
    s.status = "cancelled";
    s.error = errorOf(p.error);
  },
  EXECUTION_CONTINUED(s, p, e) {
    if (!isTerminalEvent(e)) return;
    s.status = "continued";
    if (str(p.successorId)) s._continuedTo = p.successorId;
  },
  SUBJECT_ERASED(s, p, e) {
    if (e.meta?.kernel !== true || !str(p.subject) || p.subject === "") return;
    (s._erased ??= []).push(p.subject);
  },
  STATE_RESTORED(s, p, e) {
    // Kernel-stamped only (schema 1.6.0): an app event that borrows the name is inert.
    if (e.meta?.kernel !== true) return;
    const record = readRestored(p.state);
    if (typeof record === "string") return;
    applyRestored(s, record);
    if (str(p.flow) && p.flow !== "") {
      s.flow = p.flow;
      s.flowVersion = str(p.flowVersion) ? p.flowVersion : "";
      s.fingerprint = str(p.fingerprint) ? p.fingerprint : "";
    }
  },
};
