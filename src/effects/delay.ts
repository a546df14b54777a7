/** Waits on real time that a signal can cut short (retry backoffs), and races against one. */
import { MAX_TIMER_CHUNK_MS as MAX_TIMER_MS } from "../kernel/clock.ts";

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

/**
 * Settles with `work`, or rejects with the signal's reason the moment it aborts: a step whose
 * code ignores its signal still ends on time (what it goes on doing is dropped).
 */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(reasonOf(signal));
  return new Promise<T>((resolve, reject) => {
    const aborted = () => reject(reasonOf(signal));
    signal.addEventListener("abort", aborted, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener("abort", aborted);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", aborted);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
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
