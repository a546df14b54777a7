/**
 * The memory store's data, and a handle over it: what every part of the store (append.ts,
 * reads.ts, leases.ts, ...) shares, declared in one place.
 *
 * H1. The data is the store's, shared by every handle over it (`reopen()`); a handle is one
 *     process's view: whether it is closed, and, a fleet member's, its subscriptions (fleet.ts F3).
 * H2. Every call on a closed handle throws InvariantViolation (`live`), as a call on a closed
 *     connection would; closing one handle leaves the others open.
 * H3. Only a fleet member's handle sends wakes (S18); a plain store tells no one (`wake`), and
 *     does not even build them.
 */
import { InvariantViolation } from "../../kernel/errors.ts";
import type {
  DueTimer,
  ExecutionSummary,
  ForkLink,
  FleetWake,
  InboxMessage,
  Lease,
  Member,
  Notice,
  QueueEntry,
  Schedule,
  StoreHooks,
} from "../spi.ts";
import { send, type Subscribers } from "./fleet.ts";
import { newLimiterData, type LimiterData } from "./limiter-rows.ts";
import type { StoredEvent } from "./stored-event.ts";

export interface Data {
  events: Map<string, StoredEvent[]>;
  executions: Map<string, ExecutionSummary>;
  snapshots: Map<string, { seq: number; stateJson: string }>;
  leases: Map<string, Lease>;
  timers: Map<string, DueTimer>;
  notices: (Notice & { owner: string })[];
  schedules: Map<string, Schedule>;
  inbox: Map<string, InboxMessage[]>;
  /** Key material by id (S19): part of the data, so `reopen()` keeps it (S5). */
  keys: Map<string, string>;
  /** The forks of each origin, oldest first (S21). */
  forks: Map<string, ForkLink[]>;
  /** The fleet's members by owner (S22). */
  members: Map<string, Member>;
  /** The queue entry of each execution recorded in a queue (S26..S28), its notBeforeMs kept. */
  queues: Map<string, QueueEntry>;
  /** Rate limiters' grants, waiters and blocks (S30..S34, limiters.ts). */
  limiters: LimiterData;
  /** The wake subscriptions of every handle over the data (a fleet store's only). */
  subscribers: Subscribers;
}

/** A new store's data: empty. */
export function newData(): Data {
  return {
    events: new Map(),
    executions: new Map(),
    snapshots: new Map(),
    leases: new Map(),
    timers: new Map(),
    notices: [],
    schedules: new Map(),
    inbox: new Map(),
    keys: new Map(),
    forks: new Map(),
    members: new Map(),
    queues: new Map(),
    limiters: newLimiterData(),
    subscribers: new Set(),
  };
}

/** One handle over a store's data (H1): closed or not, and, a fleet member's, its subscriptions. */
export interface Handle {
  readonly data: Data;
  readonly hooks: StoreHooks;
  closed: boolean;
  /** A fleet member's subscriptions, which its close ends (fleet.ts F3); undefined otherwise. */
  own?: Subscribers;
}

export const handle = (data: Data, hooks: StoreHooks, own?: Subscribers): Handle =>
  own ? { data, hooks, closed: false, own } : { data, hooks, closed: false };

/** H2. */
export const live = (h: Handle) => {
  if (h.closed) throw new InvariantViolation("memory store used after close");
};

/** H3: sends wakes (S18) when this handle is a fleet member's; a plain store tells no one. */
export const wake = (h: Handle, wakes: () => FleetWake[]) => {
  if (h.own) send(h.data.subscribers, wakes());
};

/** The key of an execution's timer row in `Data.timers`. */
export const timerKey = (id: string, timerId: string) => `${id}\u0000${timerId}`;
