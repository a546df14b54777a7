/**
 * Local timers for the waits of runs this process holds. Wake times are on the runtime clock;
 * setTimeout waits real milliseconds, so the clock must advance in real time. A wait longer than
 * 2^31-1 ms is armed in chunks (Node turns a longer delay into 1 ms). Timers are not unref'd: a
 * flow sleeping in this process keeps it alive, as a pending step would.
 *
 * Durable timers live in the store (rows derived from TIMER_SCHEDULED and SUSPENDED); the
 * runtime's background loop fires those of executions no process holds.
 */
import { MAX_TIMER_CHUNK_MS, type Clock } from "../kernel/clock.ts";

export class TimerService {
  private readonly handles = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly clock: Clock,
    private readonly fire: (executionId: string, callId: string) => Promise<void>,
  ) {}

  arm(executionId: string, callId: string, wakeAtMs: number): void {
    const key = `${executionId}\u0000${callId}`;
    this.disarm(executionId, callId);
    const step = () => {
      const remaining = wakeAtMs - this.clock.now();
      if (remaining <= 0) {
        this.handles.delete(key);
        void this.fire(executionId, callId);
        return;
      }
      this.handles.set(key, setTimeout(step, Math.min(remaining, MAX_TIMER_CHUNK_MS)));
    };
    step();
  }

  disarm(executionId: string, callId: string): void {
    const key = `${executionId}\u0000${callId}`;
    const handle = this.handles.get(key);
    if (handle) clearTimeout(handle);
    this.handles.delete(key);
  }

  armed(executionId: string, callId: string): boolean {
    return this.handles.has(`${executionId}\u0000${callId}`);
  }

  clear(): void {
    for (const h of this.handles.values()) clearTimeout(h);
    this.handles.clear();
  }
}
