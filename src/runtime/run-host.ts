/** What a Run needs from its runtime; the runtime implements it. */
import type { Clock } from "../kernel/clock.ts";
import type { Json } from "../kernel/json.ts";
import type { InboxMessage } from "../store/spi.ts";
import type { Journal } from "./journal.ts";
import type { Run } from "./run.ts";
import type { Tracing } from "./tracing.ts";

export interface RunHost {
  readonly clock: Clock;
  readonly journal: Journal;
  readonly leaseTtlMs: number;
  readonly ownerId: string;
  /** The fewest events between snapshots (see Run.snapshotFor). */
  readonly snapshotEvery: number;
  /** Opens the span of each drive (tracing.ts). */
  readonly tracing: Tracing;
  /** Validates a flow's return value against the output bound. */
  boundOutput(value: unknown, flowName: string): Json | undefined;
  /** The run's body waits on something only the outside world settles. */
  parked(run: Run): void;
  /** The run recorded a terminal event (whose batch released the lease). */
  ended(run: Run): void;
  /** The run stopped without an outcome (fenced, non-determinism, closing). */
  stopped(run: Run, error: Error): void;
  renew(run: Run): void;
  armTimer(executionId: string, callId: string, wakeAtMs: number): void;
  disarmTimer(executionId: string, callId: string): void;
  /** A topic's messages in a chain's inbox past `afterSeq` (one batch). */
  readInbox(chainId: string, topic: string, afterSeq: number): Promise<InboxMessage[]>;
  /** Reports an error no caller awaits. */
  report(error: unknown): void;
}
