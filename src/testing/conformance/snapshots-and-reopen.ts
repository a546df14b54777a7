/**
 * S8: the snapshot with the highest seq wins. S5: everything committed reads back the same after
 * the store is closed and reopened (a process restart).
 */
import { describe, expect, it } from "./vitest.ts";
import { initialState, type Snapshot } from "../../fold/state.ts";
import type { Store } from "../../store/spi.ts";
import {
  acquire,
  appendOne,
  batch,
  envelope,
  envelopes,
  expectAllOk,
  expectRefused,
  start,
  T0,
  TTL_MS,
  type Harness,
} from "./helpers.ts";

function snapshot(executionId: string, seq: number): Snapshot {
  const state = initialState(executionId);
  state.seq = seq;
  state.status = "running";
  state.flow = "flow-a";
  state.frames = {
    "s#0": {
      kind: "step",
      name: "search",
      scope: "",
      status: "completed",
      firstStartedAt: T0,
      attempts: 1,
      output: { hits: [seq] },
    },
  };
  state.order = { "": ["step:s#0"] };
  return { seq, state };
}

/** Everything a reader can see, for a before/after comparison across a restart. */
async function everything(store: Store, ids: readonly string[]) {
  const per = await Promise.all(
    ids.map(async (id) => ({
      events: await store.read(id),
      head: await store.head(id),
      lease: await store.getLease(id),
      snapshot: await store.loadSnapshot(id),
    })),
  );
  return {
    per,
    list: await store.list(),
    due: await store.dueTimers(Number.MAX_SAFE_INTEGER, 100),
    next: await store.nextWakeAt(),
  };
}

export function snapshotSuite(h: Harness): void {
  describe("snapshots (S8)", () => {
    it("loads what was saved, per execution", async () => {
      const store = await h.open();
      expect(await store.loadSnapshot("a")).toBeUndefined();
      const saved = snapshot("a", 3);
      const saving = store.saveSnapshot("a", saved);
      // The store copies before it first yields: the caller goes on changing its state.
      saved.state.flow = "mutated while saving";
      await saving;
      saved.state.seq = 99;
      expect(await store.loadSnapshot("a")).toEqual(snapshot("a", 3));
      expect(await store.loadSnapshot("b")).toBeUndefined();
      await store.saveSnapshot("b", snapshot("b", 1));
      expect(await store.loadSnapshot("b")).toEqual(snapshot("b", 1));
      expect(await store.loadSnapshot("a")).toEqual(snapshot("a", 3));
    });

    it("each load returns a snapshot of its own, which the caller may change", async () => {
      const store = await h.open();
      await store.saveSnapshot("a", snapshot("a", 3));
      const first = await store.loadSnapshot("a");
      if (!first) throw new Error("the snapshot was not saved");
      // loadState folds onto the loaded state in place: nothing the store keeps may change.
      first.state.seq = 99;
      first.state.frames["s#0"]!.output = "changed";
      first.state.order[""]!.push("step:s#1");
      expect(await store.loadSnapshot("a")).toEqual(snapshot("a", 3));
    });

    it("a newer snapshot replaces an older one; an older one never replaces a newer one", async () => {
      const store = await h.open();
      await store.saveSnapshot("a", snapshot("a", 3));
      await store.saveSnapshot("a", snapshot("a", 7));
      expect(await store.loadSnapshot("a")).toEqual(snapshot("a", 7));
      await store.saveSnapshot("a", snapshot("a", 5));
      await store.saveSnapshot("a", snapshot("a", 0));
      expect(await store.loadSnapshot("a")).toEqual(snapshot("a", 7));
    });
  });

  const reopen = h.reopen;
  if (!reopen) return;

  describe("after a restart (S5)", () => {
    it("events, heads, list, leases, timers and snapshots read back the same", async () => {
      const store = await h.open();
      const fa = await start(store, "a", { count: 3 });
      const wait = envelope("a", 3, "SUSPENDED", {
        callId: "w1",
        scope: "",
        name: "approve",
        wakeAtMs: 4000,
      });
      expectAllOk(await store.appendMany([batch([wait], fa, { status: "parked" })]));
      const fb = await start(store, "b", { flow: "other", count: 2, status: "completed" });
      await store.releaseLease("b", "w1", fb);
      await store.saveSnapshot("a", snapshot("a", 2));
      const before = await everything(store, ["a", "b", "c"]);
      expect(before.due).toHaveLength(1);

      const after = await reopen(store);
      expect(await everything(after, ["a", "b", "c"])).toEqual(before);
    });

    it("the fence, the sequence check and the lease hold across a restart", async () => {
      const first = await h.open();
      const fa = await start(first, "a", { count: 2 });
      const store = await reopen(first);
      expectRefused(
        await appendOne(store, batch(envelopes("a", 1, 1), fa)),
        "LOOM_SEQUENCE_CONFLICT",
      );
      expectRefused(await appendOne(store, batch(envelopes("a", 2, 1), fa + 1)), "LOOM_FENCED");
      expect(await store.acquireLease("a", "w2", { ttlMs: TTL_MS, nowMs: T0 + 1 })).toBeUndefined();
      expect((await appendOne(store, batch(envelopes("a", 2, 1), fa))).ok).toBe(true);
      const taken = await acquire(store, "a", "w2", T0 + TTL_MS);
      expect(taken.fence).toBe(fa + 1);
      const again = await reopen(store);
      expect(await again.read("a")).toEqual(envelopes("a", 0, 3));
      expect(await again.getLease("a")).toEqual(taken);
    });
  });
}
