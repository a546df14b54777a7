/**
 * The background loop: the runtime's duties (due timers, schedules, recovery) run in ticks, every
 * poll interval and sooner when something asks (a nudge, a fleet's wake).
 *
 * Invariants (tests cite B1..B3):
 * B1. One tick at a time: a tick asked for while one runs runs right after it.
 * B2. A tick is never later than asked: `within(ms)` moves the next tick earlier, never later,
 *     also when it is asked for while a tick runs; without asking, the next tick is one poll
 *     interval after the last ended.
 * B3. Once stopped, nothing is scheduled; `settled` waits (bounded) for a tick in flight.
 */
export class BackgroundLoop {
  private timer: NodeJS.Timeout | undefined;
  /** When the next tick is due (performance.now()), while one is scheduled. */
  private nextAt = Infinity;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(
    private readonly pollMs: number,
    /** Each on its own: one that fails (a store error) does not keep the others from running. */
    private readonly duties: readonly (() => Promise<unknown>)[],
    private readonly report: (error: unknown) => void,
  ) {}

  /** A tick now (B1: right after the one running). */
  nudge(): void {
    this.schedule(0);
  }

  /** A tick within `afterMs` (B2): sooner than scheduled, never later. */
  within(afterMs: number): void {
    if (performance.now() + afterMs < this.nextAt) this.schedule(afterMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** Resolves when the tick in flight, if any, has ended, or after `boundMs` (B3). */
  async settled(boundMs: number): Promise<void> {
    if (!this.running) return;
    let bound: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (bound = setTimeout(resolve, boundMs)));
    await Promise.race([this.running, timeout]);
    clearTimeout(bound);
  }

  private schedule(afterMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.nextAt = performance.now() + afterMs;
    this.timer = setTimeout(() => {
      this.nextAt = Infinity;
      this.tick();
    }, afterMs);
    this.timer.unref();
  }

  private tick(): void {
    if (this.stopped) return;
    if (this.running) {
      // B1: asked for while the duties run: they run again right after.
      this.again = true;
      return;
    }
    this.again = false;
    this.running = this.run();
  }

  private async run(): Promise<void> {
    try {
      for (const duty of this.duties) {
        if (this.stopped) return;
        await duty().catch((e: unknown) => this.report(e));
      }
    } finally {
      this.running = undefined;
      // B2: a tick asked for sooner than the poll while these ran keeps its time.
      const asked = this.nextAt - performance.now();
      this.schedule(this.again ? 0 : Math.max(0, Math.min(this.pollMs, asked)));
    }
  }
}
