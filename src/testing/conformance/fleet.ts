/**
 * The fleet conformance suite: what a store shared by many processes adds (`FleetStore`), S17
 * (claims) and S18 (wakes). A store that implements `FleetStore` passes this besides
 * `runStoreConformance`. The tests act through a second store over the same data (`peer`), as
 * another process of the fleet would. The claims are fleet-claims.ts's, the wakes fleet-wakes.ts's.
 *
 * @example
 * runFleetConformance({
 *   name: "postgres",
 *   newStore: (hooks) => postgresStore({ connectionString, schema: freshSchema(), hooks }),
 *   peer: (store) => postgresStore({ connectionString, schema: store.schema }),
 * });
 */
import { afterEach, describe } from "./vitest.ts";
import type { StoreHooks } from "../../store/spi.ts";
import { claimFilterTests, claimOwnershipTests } from "./fleet-claims.ts";
import type { FleetHarness, FleetMemberStore } from "./fleet-helpers.ts";
import {
  namedWakeTests,
  queueWakeTests,
  quietWakeTests,
  runnableWakeTests,
} from "./fleet-wakes.ts";

export interface FleetConformanceOptions<S extends FleetMemberStore> {
  name: string;
  /** A fresh, empty store; `hooks` must reach its append transaction (see `StoreHooks`). */
  newStore: (hooks?: StoreHooks) => Promise<S> | S;
  /** Another store over the same data as `store`, open beside it (another process). */
  peer: (store: S) => Promise<S> | S;
}

export function runFleetConformance<S extends FleetMemberStore>(
  opts: FleetConformanceOptions<S>,
): void {
  describe(`fleet conformance: ${opts.name}`, () => {
    let open: S[] = [];
    afterEach(async () => {
      const stores = open;
      open = [];
      await Promise.all(stores.map((s) => s.close()));
    });
    const newStore = async (hooks?: StoreHooks) => {
      const store = await opts.newStore(hooks);
      open.push(store);
      return store;
    };
    /** A store and a peer over the same data. */
    const pair = async (hooks?: StoreHooks) => {
      const store = await newStore(hooks);
      const peer = await opts.peer(store);
      open.push(peer);
      return { store, peer };
    };

    const f: FleetHarness = { newStore, pair };

    describe("claims (S17)", () => {
      claimOwnershipTests(f);
      claimFilterTests(f);
    });

    describe("wakes (S18)", () => {
      runnableWakeTests(f);
      namedWakeTests(f);
      queueWakeTests(f);
      quietWakeTests(f);
    });
  });
}
