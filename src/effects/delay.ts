/** Waits on real time that a signal can cut short (retry backoffs). */

/** Node clamps a longer setTimeout to 1 ms, so longer waits are armed in chunks. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Waits `ms`, or rejects with the signal's reason the moment it aborts. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(reasonOf(signal));
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const aborted = () => {
      clearTimeout(timer);
      reject(reasonOf(signal));
    };
    const arm = (left: number) => {
      timer = setTimeout(
        () => {
          if (left > MAX_TIMER_MS) return arm(left - MAX_TIMER_MS);
          signal.removeEventListener("abort", aborted);
          resolve();
        },
        Math.min(Math.max(0, left), MAX_TIMER_MS),
      );
    };
    signal.addEventListener("abort", aborted, { once: true });
    arm(ms);
  });
}

/** The signal's reason as an Error (an AbortError when it was not one). */
export function reasonOf(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const e = new Error(`aborted: ${String(reason)}`);
  e.name = "AbortError";
  return e;
}
