/**
 * The shapes of the flow-control views (verbs-flow-control.ts FV1..FV6): types only, so the
 * dashboard's client (src/ui/api-types.ts) can name them without the runtime's modules.
 * Positions are 1-based: 1 is admitted, or granted, next.
 */
import type { QueueLimits, RateLimit } from "../store/spi.ts";

/** An execution waiting in a queue (FV1). */
export interface QueueWaiterRow {
  executionId: string;
  flow: string;
  key?: string;
  priority: number;
  /** 1-based: 1 is admitted next. */
  position: number;
  createdAtMs: number;
  /** A debounce's earliest admission. */
  notBeforeMs?: number;
  /** flow-control-estimates.ts FE1, FE2: undefined when unknowable. */
  expectedWaitMs?: number;
}

export interface QueueRow {
  name: string;
  /** FV2: undefined when this runtime does not know them. */
  limits?: QueueLimits;
  active: number;
  activeByKey: Record<string, number>;
  waitingCount: number;
  /** The first `limit` waiters (FV1). */
  waiting: QueueWaiterRow[];
  /** The mean slot-hold time of recently ended executions of the queue (FE1), when any is read
   * (only when this runtime knows its limits and some execution waits). */
  meanHoldMs?: number;
}

export interface LimiterWaiterRow {
  executionId: string;
  /** The reservation's id (one per call made). */
  id: string;
  /** 1-based place in the store's line (FV5). */
  position: number;
  sinceMs: number;
  /** flow-control-estimates.ts FE3, FE4: undefined when unknowable. */
  expectedWaitMs?: number;
}

export interface LimiterRow {
  name: string;
  /** FV2: undefined when this runtime does not know it. */
  limit?: RateLimit;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  inFlight: number;
  blockedUntilMs?: number;
  waiting: LimiterWaiterRow[];
}

/** FV4: why an execution waits. */
export type WaitReason =
  | {
      kind: "queue";
      queue: string;
      key?: string;
      position: number;
      waitingCount: number;
      notBeforeMs?: number;
      expectedWaitMs?: number;
    }
  | { kind: "limiter"; limiter: string; position: number; expectedWaitMs?: number };

export interface QueuesOptions {
  /** The waiters shown per queue (default 100, at most 1000). */
  limit?: number;
}
