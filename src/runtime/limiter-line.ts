/**
 * The calls of one process waiting on one rate limiter, in the order they came (rate-limits.ts
 * RL10): only the first asks the store, so a process holds one place in the store's line, not one
 * per waiting call, and a thousand waiting calls cost the store what one does.
 *
 * Invariants (tests cite LL1, LL2):
 * LL1. `enter` resolves for one call at a time per line, oldest first; `leave` lets the next in.
 * LL2. A call whose signal aborts while it waits to enter is removed from the line at once and
 *      rejects with the signal's reason; the calls behind it move up.
 */
export class LimiterLine {
  private busy = false;
  private readonly waiting: { go: () => void }[] = [];

  /** LL1, LL2: resolves when this call is first; `leave` must follow. */
  enter(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (!this.busy) {
      this.busy = true;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const entry = {
        go: () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(entry);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(entry);
    });
  }

  /** How many calls wait behind the one that asks the store. */
  get behind(): number {
    return this.waiting.length;
  }

  /** LL1 */
  leave(): void {
    const next = this.waiting.shift();
    if (next) next.go();
    else this.busy = false;
  }
}
