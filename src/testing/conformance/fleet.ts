/**
 * The fleet conformance suite: what a store shared by many processes adds (`FleetStore`), S17
 * (claims) and S18 (wakes). A store that implements `FleetStore` passes this besides
 * `runStoreConformance`. The tests act through a second store over the same data (`peer`), as
 * another process of the fleet would.
 *
 * @example
 * runFleetConformance({
 *   name: "postgres",
 *   newStore: (hooks) => postgresStore({ connectionString, schema: freshSchema(), hooks }),
 *   peer: (store) => postgresStore({ connectionString, schema: store.schema }),
 * });
 */
import { afterEach, describe, expect, it } from "./vitest.ts";
import { isLoomError } from "../../kernel/errors.ts";
import type { ExecutionStatus } from "../../kernel/events.ts";
import { indexChanges } from "../../fold/index-changes.ts";
import type { FleetStore, FleetWake, Lease, Store, StoreHooks } from "../../store/spi.ts";
import {
  acquire,
  appendOne,
  batch,
  envelope,
  envelopes,
  expectAllOk,
  expectRefused,
  FLOW,
  start,
  T0,
  TTL_MS,
} from "./helpers.ts";

type FleetMemberStore = Store & FleetStore;

export interface FleetConformanceOptions<S extends FleetMemberStore> {
  name: string;
  /** A fresh, empty store; `hooks` must reach its append transaction (see `StoreHooks`). */
  newStore: (hooks?: StoreHooks) => Promise<S> | S;
  /** Another store over the same data as `store`, open beside it (another process). */
  peer: (store: S) => Promise<S> | S;
}

const WAKE_WAIT_MS = 5000;

/** A subscription that keeps what it hears. */
interface Ear {
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

async function ear(store: FleetStore): Promise<Ear> {
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
async function runnable(
  store: Store,
  id: string,
  status: ExecutionStatus = "running",
  flow = FLOW,
) {
  const fence = await start(store, id, { flow, status });
  await store.releaseLease(id, "w1", fence);
}

const claimOpts = (nowMs = T0, limit = 100, flows: readonly string[] = [FLOW]) => ({
  flows,
  limit,
  ttlMs: TTL_MS,
  nowMs,
});

const ids = (leases: readonly Lease[]) => leases.map((l) => l.executionId);

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

    describe("claims (S17)", () => {
      it("two concurrent claimers on 50 runnable executions get disjoint sets covering all", async () => {
        const { store, peer } = await pair();
        const all = Array.from({ length: 50 }, (_, i) => `x-${String(i).padStart(2, "0")}`);
        for (const [i, id] of all.entries()) {
          await runnable(store, id, i % 2 ? "running" : "pending");
        }
        const drain = async (claimer: FleetMemberStore, owner: string) => {
          const got: Lease[] = [];
          for (;;) {
            const leases = await claimer.claimRunnable(owner, claimOpts(T0, 7));
            if (leases.length === 0) return got;
            got.push(...leases);
          }
        };
        const [first, second] = await Promise.all([drain(store, "c1"), drain(peer, "c2")]);
        const claimed = [...ids(first), ...ids(second)];
        expect(new Set(claimed).size).toBe(claimed.length);
        expect([...claimed].sort()).toEqual(all);
        for (const [owner, leases] of [
          ["c1", first],
          ["c2", second],
        ] as const) {
          for (const lease of leases) {
            expect(lease).toEqual({
              executionId: lease.executionId,
              owner,
              fence: 2,
              expiresAtMs: T0 + TTL_MS,
            });
            expect(await store.getLease(lease.executionId)).toEqual(lease);
          }
        }
        expect(await store.claimRunnable("c3", claimOpts())).toEqual([]);
      });

      it("a live lease is not claimed; an expired or released one is, and its fence moves", async () => {
        const store = await newStore();
        const live = await start(store, "live", { status: "running" });
        await runnable(store, "released", "pending");
        const later = T0 + TTL_MS - 1;
        expect(ids(await store.claimRunnable("c1", claimOpts(later)))).toEqual(["released"]);
        expect(await store.getLease("live")).toMatchObject({ owner: "w1", fence: live });
        const expired = T0 + TTL_MS;
        const [taken] = await store.claimRunnable("c2", claimOpts(expired));
        expect(taken).toEqual({
          executionId: "live",
          owner: "c2",
          fence: live + 1,
          expiresAtMs: expired + TTL_MS,
        });
        // The fence moved: what the old owner appends now is refused (S3).
        expectRefused(await appendOne(store, batch(envelopes("live", 1, 1), live)), "LOOM_FENCED");
        expect(await store.claimRunnable("c3", claimOpts(expired))).toEqual([]);
      });

      it("claims only pending or running executions of the named flows, at most `limit`", async () => {
        const store = await newStore();
        for (const id of ["a-1", "a-2", "a-3"]) await runnable(store, id, "running", "alpha");
        for (const id of ["b-1", "b-2"]) await runnable(store, id, "pending", "beta");
        await runnable(store, "parked", "parked", "alpha");
        await runnable(store, "done", "completed", "alpha");
        expect(await store.claimRunnable("c", claimOpts(T0, 10, []))).toEqual([]);
        expect(await store.claimRunnable("c", claimOpts(T0, 0, ["alpha"]))).toEqual([]);
        expect(ids(await store.claimRunnable("c", claimOpts(T0, 10, ["beta", "gamma"])))).toEqual([
          "b-1",
          "b-2",
        ]);
        expect(await store.claimRunnable("c", claimOpts(T0, 2, ["alpha"]))).toHaveLength(2);
        expect(ids(await store.claimRunnable("c", claimOpts(T0, 2, ["alpha"])))).toHaveLength(1);
        expect(await store.claimRunnable("c", claimOpts(T0, 2, ["alpha"]))).toEqual([]);
        expect(await store.getLease("parked")).toMatchObject({ owner: undefined, fence: 1 });
        expect(await store.getLease("done")).toMatchObject({ owner: undefined, fence: 1 });
      });

      it("refuses a limit, ttl or time that is not a non-negative integer (LOOM_INVALID_INPUT)", async () => {
        const store = await newStore();
        for (const bad of [{ limit: -1 }, { limit: 1.5 }, { ttlMs: Number.NaN }, { nowMs: -5 }]) {
          const error: unknown = await store.claimRunnable("c", { ...claimOpts(), ...bad }).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(isLoomError(error, "LOOM_INVALID_INPUT"), JSON.stringify(bad)).toBe(true);
        }
      });
    });

    describe("wakes (S18)", () => {
      it("a new pending execution with no lease held is runnable, heard by every listener", async () => {
        const { store, peer } = await pair();
        const [here, there] = [await ear(store), await ear(peer)];
        const claimLease = { owner: "starter", expiresAtMs: T0 + TTL_MS };
        const first = batch(envelopes("p", 0, 1), 1, {
          status: "pending",
          claimLease,
          releaseLease: "starter",
        });
        expectAllOk(await peer.appendMany([first]));
        const wake = { kind: "runnable", executionId: "p" };
        expect(await here.hear((w) => w.kind === "runnable", "runnable")).toEqual(wake);
        expect(await there.hear((w) => w.kind === "runnable", "runnable")).toEqual(wake);
      });

      it("a lease released while running is runnable; a parked one's, or a held one, is not", async () => {
        const { store, peer } = await pair();
        const ears = await ear(store);
        const fr = await start(peer, "r", { status: "running" });
        const fp = await start(peer, "q", { status: "parked" });
        await peer.releaseLease("q", "w1", fp);
        await peer.releaseLease("r", "someone-else", fr);
        expect(await ears.settle(peer)).toEqual([]);
        await peer.releaseLease("r", "w1", fr);
        expect(await ears.settle(peer)).toEqual([{ kind: "runnable", executionId: "r" }]);
      });

      it("a notice names its owner and execution", async () => {
        const { store, peer } = await pair();
        const ears = await ear(store);
        const fence = await start(peer, "a", { owner: "w1" });
        const notice = { owner: "w2", kind: "cancel" as const };
        expectAllOk(await peer.appendMany([batch(envelopes("a", 1, 1), fence, { notice })]));
        expect(await ears.hear((w) => w.kind === "notice", "notice")).toEqual({
          kind: "notice",
          owner: "w2",
          executionId: "a",
        });
      });

      it("a message names its chain", async () => {
        const { store, peer } = await pair();
        const ears = await ear(store);
        await peer.appendMessage("chain-1", { topic: "t", key: "k", payload: { n: 1 }, atMs: T0 });
        expect(await ears.hear((w) => w.kind === "message", "message")).toEqual({
          kind: "message",
          chainId: "chain-1",
        });
      });

      it("a timer row written, a wake row for another execution, a timer deferred: each its time", async () => {
        const { store, peer } = await pair();
        const fence = await start(peer, "a");
        const ears = await ear(store);
        const sleep = envelope("a", 1, "TIMER_SCHEDULED", {
          callId: "t1",
          scope: "",
          name: "sleep",
          wakeAtMs: T0 + 500,
        });
        const index = indexChanges([sleep]);
        expect(index?.timersSet).toEqual([{ timerId: "t1", wakeAtMs: T0 + 500 }]);
        const wakes = [{ executionId: "b", timerId: "child:a", wakeAtMs: T0 + 7 }];
        const withWake = index && { ...index, wakes };
        expectAllOk(
          await peer.appendMany([batch([sleep], fence, { status: "parked", index: withWake })]),
        );
        await peer.deferTimer("a", "t1", T0 + 900);
        await peer.deferTimer("a", "gone", T0 + 1);
        const heard = await ears.settle(peer);
        expect(heard).toHaveLength(3);
        expect(heard).toEqual(
          expect.arrayContaining([
            { kind: "timer", executionId: "a", wakeAtMs: T0 + 500 },
            { kind: "timer", executionId: "b", wakeAtMs: T0 + 7 },
          ]),
        );
        expect(heard[2]).toEqual({ kind: "timer", executionId: "a", wakeAtMs: T0 + 900 });
      });

      it("nothing for an append under a held lease, a refused batch or a rolled-back commit", async () => {
        let failing = false;
        const { store, peer } = await pair({
          beforeCommit: () => {
            if (failing) throw new Error("injected crash before commit");
          },
        });
        const ears = await ear(peer);
        const fence = await start(store, "a", { owner: "w1" });
        const { fence: fb } = await acquire(store, "b", "w1");
        const sleep = envelope("a", 2, "TIMER_SCHEDULED", {
          callId: "t1",
          scope: "",
          name: "sleep",
          wakeAtMs: T0 + 500,
        });
        const loud = (events: ReturnType<typeof envelopes>, f: number) =>
          batch(events, f, {
            status: "pending",
            releaseLease: "w1",
            notice: { owner: "w2", kind: "cancel" },
            index: indexChanges(events),
          });
        // A step appended under a lease still held wakes nobody.
        expectAllOk(await store.appendMany([batch(envelopes("a", 1, 1), fence)]));
        const [stale] = await store.appendMany([loud([sleep], fence + 1)]);
        expectRefused(stale, "LOOM_FENCED");
        failing = true;
        await expect(
          store.appendMany([loud([sleep], fence), loud(envelopes("b", 0, 1), fb)]),
        ).rejects.toThrow("injected crash before commit");
        failing = false;
        await store.releaseLease("a", "w1", fence + 1);
        expect(await ears.settle(store)).toEqual([]);
      });

      it("an unsubscribed listener hears nothing more; the others still do", async () => {
        const { store, peer } = await pair();
        const gone = await ear(store);
        const stays = await ear(store);
        await gone.stop();
        await gone.stop();
        await peer.appendMessage("c", { topic: "t", key: "k", payload: null, atMs: T0 });
        await stays.hear((w) => w.kind === "message" && w.chainId === "c", "for c");
        expect(await stays.settle(peer)).toEqual([{ kind: "message", chainId: "c" }]);
        expect(gone.wakes).toEqual([]);
        await stays.stop();
        // With no one left listening, a new subscription listens again.
        const again = await ear(store);
        expect(await again.settle(peer)).toEqual([]);
      });
    });
  });
}
