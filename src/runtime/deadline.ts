/**
 * Deadlines on the runtime clock (ADR 0020 A4, L26): the remaining time is measured with the
 * runtime's own `now` (the clock that stamped the anchor, never raw `Date.now()`), capped at the
 * declared budget, and waited on real time in chunks of at most 2^31-1 ms, since Node turns a
 * longer setTimeout into 1 ms. After each chunk the remaining time is measured again; the last
 * chunk fires without another look at the clock.
 *
 * Consequences the docs spell out: the clock must advance in real time for a deadline to fire on
 * time; under a FIXED clock the elapsed time is always 0, so every crash or resume re-grants the
 * whole budget, and a budget above 2^31-1 ms never fires within one run (each chunk re-arms).
 * The timers are not unref'd: a deadline is not a background task.
 */
import { MAX_TIMER_CHUNK_MS, type Clock } from "../kernel/clock.ts";

/** Arms `fire` for `deadlineAtMs`; never fires synchronously. Returns the disarm. */
export function armDeadline(
  clock: Clock,
  deadlineAtMs: number,
  budgetMs: number,
  fire: () => void,
): () => void {
  let handle: NodeJS.Timeout | undefined;
  const arm = () => {
    const remaining = Math.max(0, Math.min(deadlineAtMs - clock.now(), budgetMs));
    if (remaining > MAX_TIMER_CHUNK_MS) {
      handle = setTimeout(arm, MAX_TIMER_CHUNK_MS);
      return;
    }
    handle = setTimeout(() => {
      handle = undefined;
      fire();
    }, remaining);
  };
  arm();
  return () => {
    if (handle) clearTimeout(handle);
    handle = undefined;
  };
}

/** The time left before `deadlineAtMs` on `clock`, capped at the budget (may be <= 0). */
export function remainingMs(clock: Clock, deadlineAtMs: number, budgetMs: number): number {
  return Math.min(deadlineAtMs - clock.now(), budgetMs);
}
