/**
 * The one store conformance suite (STYLE 3): every store's test file calls
 * `runStoreConformance` and must pass all of it. Tests cite the contract S1..S34 in `../spi.ts`
 * (S21 and S22 in `../spi-records.ts`, S26..S29 in `../spi-queues.ts`: queues.ts, S30..S34 in
 * `../spi-limiters.ts`; S17 and S18, a fleet's, are `runFleetConformance`'s: fleet.ts).
 *
 * @example
 * runStoreConformance({
 *   name: "memory",
 *   newStore: (hooks) => memoryStore(hooks),
 *   reopen: async (store) => {
 *     await store.close();
 *     return store.reopen();
 *   },
 * });
 */
import { afterEach, describe } from "./vitest.ts";
import type { Store, StoreHooks } from "../../store/spi.ts";
import { appendSuite } from "./appends.ts";
import { batchExtrasSuite } from "./batch-extras.ts";
import { crashAndListSuite } from "./crash-and-list.ts";
import { inboxSuite } from "./inbox.ts";
import { keysSuite } from "./keys.ts";
import type { Harness } from "./helpers.ts";
import { leaseSuite } from "./leases.ts";
import { limiterSuite } from "./limiters.ts";
import { recordsSuite } from "./records.ts";
import { listSortedSuite } from "./list-sorted.ts";
import { queueSuite } from "./queues.ts";
import { retentionSuite } from "./retention.ts";
import { scheduleSuite } from "./schedules.ts";
import { snapshotSuite } from "./snapshots-and-reopen.ts";
import { timerSuite } from "./timers.ts";

export interface StoreConformanceOptions<S extends Store = Store> {
  name: string;
  /** A fresh, empty store; `hooks` must reach its append transaction (see `StoreHooks`). */
  newStore: (hooks?: StoreHooks) => Promise<S> | S;
  /** Closes `store` and returns a new one over the same data. The S5 tests need it. */
  reopen?: (store: S) => Promise<S> | S;
}

export function runStoreConformance<S extends Store>(opts: StoreConformanceOptions<S>): void {
  describe(`store conformance: ${opts.name}`, () => {
    let open: S[] = [];

    afterEach(async () => {
      const stores = open;
      open = [];
      await Promise.all(stores.map((s) => s.close()));
    });

    const reopen = opts.reopen;
    const h: Harness = {
      async open(hooks) {
        const store = await opts.newStore(hooks);
        open.push(store);
        return store;
      },
      reopen:
        reopen &&
        (async (store: Store) => {
          // Find the store as the caller's own type, so `reopen` needs no cast.
          const own = open.find((s) => s === store);
          if (!own) throw new Error("conformance: reopen of a store this suite did not open");
          open = open.filter((s) => s !== own);
          const next = await reopen(own);
          open.push(next);
          return next;
        }),
    };

    appendSuite(h);
    batchExtrasSuite(h);
    crashAndListSuite(h);
    listSortedSuite(h);
    leaseSuite(h);
    timerSuite(h);
    snapshotSuite(h);
    scheduleSuite(h);
    inboxSuite(h);
    retentionSuite(h);
    keysSuite(h);
    recordsSuite(h);
    queueSuite(h);
    limiterSuite(h);
  });
}
