/**
 * What a seed of the simulator is run with (SimOptions), what it answers (SimResult), and the
 * faults it draws by default (simulator.ts).
 */
import type { Envelope } from "../src/kernel/events.ts";
import type { FaultRates } from "./faulty-store.ts";
import type { FlowCounts } from "./flow-control.ts";

export interface SimOptions {
  steps?: number;
  faults?: Partial<FaultRates>;
  /** Run on a fleet's store (true) or with one process (false); by default the seed draws it. */
  fleet?: boolean;
  /** Give the runtimes queues and limiters (flow-control.ts); by default the seed draws it. */
  flowControl?: boolean;
}

export interface SimResult extends FlowCounts {
  seed: number;
  violations: string[];
  /** Events appended to every log. */
  events: number;
  crashes: number;
  /** Executions started by the operator (a chain counts once). */
  executions: number;
  /** Generations that chains continued into (each a successor execution). */
  rotations: number;
  /** Messages in the chains' inboxes (a sender's retry counts again). */
  messages: number;
  /** Forks the operator made (a refused fork does not count). */
  forks: number;
  /** Children spawned (a child chain counts once; a child's child too). */
  children: number;
  /** Generations children continued into (counted in `rotations` too). */
  childRotations: number;
  /** Children a cascade cancelled (their parent was cancelled or continued). */
  cascades: number;
  /** Whether the seed ran on a fleet's store (fleet.ts), and with how many owner processes. */
  fleet: boolean;
  members: number;
  /** Executions the owners' claims took (a fleet's recovery, L1). */
  claims: number;
  /** Whether the seed's runtimes had queues and limiters (flow-control.ts). */
  flowControl: boolean;
  /** A hash of every log: the same seed must give the same logs, byte for byte. */
  logHash: string;
  /** How the executions (every generation of a chain) ended, by status. */
  ended: Record<string, number>;
  /** Every log, when the seed failed (`npm run sim -- ... --dump` prints them). */
  logs?: Record<string, Envelope[]>;
}

export const DEFAULT_FAULTS: FaultRates = {
  crash: 0.004,
  transient: 0.004,
  delay: 0.2,
  maxDelayMs: 5,
  dropAfterAck: 0,
  dropWake: 0.05,
  ignoreKeyConcurrency: 0,
  ignoreWindow: 0,
};
