/**
 * The bounded cache of parked runs: live flow bodies waiting on a resume or a timer, kept so
 * that waking one costs O(1) instead of a replay of its history. Bounded by count and by an
 * estimate of bytes; the least recently parked run is evicted first (replay from the log is
 * the path back for an evicted one).
 */
import type { Run } from "./run.ts";

export class ParkedCache {
  private readonly runs = new Map<string, { run: Run; bytes: number }>();
  private bytes = 0;

  constructor(
    private readonly maxExecutions: number,
    private readonly maxBytes: number,
    private readonly evict: (run: Run) => void,
  ) {}

  get size(): number {
    return this.runs.size;
  }

  add(run: Run): void {
    this.remove(run);
    this.runs.set(run.id, { run, bytes: run.approxBytes });
    this.bytes += run.approxBytes;
    while (
      this.runs.size > this.maxExecutions ||
      (this.bytes > this.maxBytes && this.runs.size > 1)
    ) {
      const oldest = this.runs.values().next().value;
      if (!oldest) break;
      this.remove(oldest.run);
      this.evict(oldest.run);
    }
  }

  remove(run: Run): void {
    const entry = this.runs.get(run.id);
    if (!entry || entry.run !== run) return;
    this.runs.delete(run.id);
    this.bytes -= entry.bytes;
  }
}
