/**
 * What the fleet conformance suite's tests share (fleet.ts): the harness each test opens its
 * stores through, an ear that keeps the wakes a subscription hears (S18), and the runnable
 * executions and claim options the claim tests (S17) build on.
 */
import type { ExecutionStatus } from "../../kernel/events.ts";
import type { FleetStore, FleetWake, Lease, Store, StoreHooks } from "../../store/spi.ts";
import { FLOW, start, T0, TTL_MS } from "./helpers.ts";

export type FleetMemberStore = Store & FleetStore;

/** What each fleet test gets: fresh stores (closed after it), and a peer over the same data. */
export interface FleetHarness {
  newStore(hooks?: StoreHooks): Promise<FleetMemberStore>;
  /** A store and a peer over the same data (another process of the fleet). */
  pair(hooks?: StoreHooks): Promise<{ store: FleetMemberStore; peer: FleetMemberStore }>;
}

const WAKE_WAIT_MS = 5000;

/** A subscription that keeps what it hears. */
export interface Ear {
  wakes: FleetWake[];
  stop: () => Promise<void>;
  /** Waits for a wake `match` accepts; fails after WAKE_WAIT_MS naming what it heard. */
  hear(match: (w: FleetWake) => boolean, what: string): Promise<FleetWake>;
  /**
   * Makes `via` append a message to a fresh chain and waits to hear it. Wakes arrive in commit
   * order, so afterwards the ear has heard everything committed before: returns the wakes heard
   * since the last settle.
   */
  settle(via: Store): Promise<FleetWake[]>;
}

let markers = 0;

export async function ear(store: FleetStore): Promise<Ear> {
  const wakes: FleetWake[] = [];
  /** Where the wakes after the last `settle` begin. */
  let settled = 0;
  const stop = await store.listen((w) => wakes.push(w));
  const hear = async (match: (w: FleetWake) => boolean, what: string) => {
    const giveUpAt = performance.now() + WAKE_WAIT_MS;
    for (;;) {
      const found = wakes.find(match);
      if (found) return found;
      if (performance.now() > giveUpAt) {
        throw new Error(
          `no wake ${what} within ${WAKE_WAIT_MS} ms; heard ${JSON.stringify(wakes)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  return {
    wakes,
    stop,
    hear,
    async settle(via) {
      const chainId = `marker-${++markers}`;
      await via.appendMessage(chainId, { topic: "m", key: chainId, payload: null, atMs: T0 });
      await hear((w) => w.kind === "message" && w.chainId === chainId, `for ${chainId}`);
      const at = wakes.findIndex((w) => w.kind === "message" && w.chainId === chainId);
      const heard = wakes.slice(settled, at);
      settled = at + 1;
      return heard;
    },
  };
}

/** Starts `id` (owner w1), then leaves it with `status` and its lease released. */
export async function runnable(
  store: Store,
  id: string,
  status: ExecutionStatus = "running",
  flow = FLOW,
) {
  const fence = await start(store, id, { flow, status });
  await store.releaseLease(id, "w1", fence);
}

export const claimOpts = (nowMs = T0, limit = 100, flows: readonly string[] = [FLOW]) => ({
  flows,
  limit,
  ttlMs: TTL_MS,
  nowMs,
});

export const ids = (leases: readonly Lease[]) => leases.map((l) => l.executionId);
