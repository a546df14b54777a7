/**
 * The memory store: every SPI on Maps, for tests, simulation and benchmarks.
 *
 * Stored events and snapshots are copies (JSON text for snapshots), so a caller that mutates what
 * it passed in or read back cannot change the log. `reopen()` gives a new store over the same
 * data, as a process restart would see it, or, with the first still open, as another process
 * sharing the store would.
 *
 * Key material (S19) lives beside the logs in the same data, so a reopen keeps it; `listKeys`
 * orders ids by their UTF-8 bytes, as the SQL stores do (../key-range.ts K1).
 *
 * `memoryStore({ fleet: true })` is also a `FleetStore` (claims S17, wakes S18, among the handles
 * over its data: fleet.ts); without it the store is not one (`isFleetStore` is false), so a runtime
 * on it recovers by listing, as on SQLite.
 *
 * The store is assembled here from its parts, split as the SPI's groups are (as the PostgreSQL
 * store is): the data and a handle over it (data.ts H1..H3), events (stored-event.ts E1, E2),
 * appends (append.ts A1..A3), reads, snapshots, leases, timers, schedules and notices, the inbox,
 * retention, keys, forks and members (records.ts), queues (queues.ts) and rate limiters
 * (limiters.ts).
 */
import type { FleetStore, Store, StoreHooks } from "../spi.ts";
import { memoryAppend } from "./append.ts";
import { handle, live, newData, type Data, type Handle } from "./data.ts";
import { claimRunnable, subscribe, type Subscribers } from "./fleet.ts";
import { memoryInbox } from "./inbox.ts";
import { memoryKeys } from "./keys.ts";
import { memoryLeases } from "./leases.ts";
import { memoryQueues } from "./queues.ts";
import { memoryLimiters } from "./limiters.ts";
import { memoryReads } from "./reads.ts";
import { memoryRecords } from "./records.ts";
import { memoryRetention } from "./retention.ts";
import { memorySchedules } from "./schedules.ts";
import { memorySnapshots } from "./snapshots.ts";
import { memoryTimers } from "./timers.ts";

export interface MemoryStore extends Store {
  /** A new store over the same data: what a restarted process, or another one, would see. */
  reopen(): MemoryStore;
}

/** A memory store that is a fleet's shared store: its handles claim work and wake each other. */
export interface MemoryFleetStore extends MemoryStore, FleetStore {
  reopen(): MemoryFleetStore;
}

/** The store's test hooks (`StoreHooks`), and whether it is a fleet's store. */
export interface MemoryStoreOptions extends StoreHooks {
  /**
   * Also implement `FleetStore` (S17, S18) among the handles over this data (`reopen()`), as
   * PostgreSQL does among processes. Off by default: the store is then no `FleetStore`.
   */
  fleet?: boolean;
}

/**
 * A new, empty memory store.
 *
 * @example
 * const store = memoryStore(); // one process's store
 * const shared = memoryStore({ fleet: true }); // a fleet's: `shared.reopen()` is another member's
 */
export function memoryStore(options: MemoryStoreOptions & { fleet: true }): MemoryFleetStore;
export function memoryStore(options?: MemoryStoreOptions): MemoryStore;
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const data = newData();
  return options.fleet === true ? openFleet(data, options) : open(handle(data, options));
}

/** A handle that is also a fleet member's store (fleet.ts). */
function openFleet(data: Data, hooks: StoreHooks): MemoryFleetStore {
  const own: Subscribers = new Set();
  const h = handle(data, hooks, own);
  return {
    ...open(h),
    async claimRunnable(owner, opts) {
      live(h);
      return claimRunnable(data.executions, data.leases, owner, opts);
    },
    async listen(onWake) {
      live(h);
      return subscribe(data.subscribers, own, onWake);
    },
    reopen: () => openFleet(data, hooks),
  };
}

function open(h: Handle): MemoryStore {
  return {
    kind: "memory",
    appendMany: memoryAppend(h),
    ...memoryReads(h),
    ...memorySnapshots(h),
    ...memoryLeases(h),
    ...memoryTimers(h),
    ...memorySchedules(h),
    ...memoryInbox(h),
    ...memoryRetention(h),
    ...memoryKeys(h),
    ...memoryRecords(h),
    ...memoryQueues(h),
    ...memoryLimiters(h),

    async close() {
      h.closed = true;
      for (const subscriber of h.own ?? []) h.data.subscribers.delete(subscriber);
      h.own?.clear();
    },

    reopen() {
      return open(handle(h.data, h.hooks));
    },
  };
}
