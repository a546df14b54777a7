/**
 * S1 across a crash (a fault injected at the commit boundary), and the execution list that the
 * batches' `status` and `flow` fields maintain.
 */
import { describe, expect, it } from "./vitest.ts";
import type { IndexChanges } from "../../fold/index-changes.ts";
import type { AppendBatch } from "../../store/spi.ts";
import {
  acquire,
  batch,
  envelope,
  envelopes,
  expectAllOk,
  start,
  T0,
  visible,
  type Harness,
} from "./helpers.ts";

const sleep = (id: string, seq: number, timerId: string, wakeAtMs: number) =>
  envelope(id, seq, "TIMER_SCHEDULED", { callId: timerId, scope: "", name: "sleep", wakeAtMs });

export function crashAndListSuite(h: Harness): void {
  crashTests(h);
  listTests(h);
}

/** S1 across a crash: a commit that fails leaves no part of any batch of the call. */
function crashTests(h: Harness): void {
  describe("no partial batch after a crash mid-transaction (S1)", () => {
    it("a commit that fails leaves nothing of any batch in the call, and the store goes on", async () => {
      let failing = false;
      const seen: (readonly AppendBatch[])[] = [];
      const store = await h.open({
        beforeCommit: (batches) => {
          seen.push(batches);
          if (failing) throw new Error("injected crash before commit");
        },
      });
      const fa = await start(store, "a");
      const setA: IndexChanges = {
        timersSet: [{ timerId: "ta", wakeAtMs: T0 + 500 }],
        timersCleared: [],
        clearAllTimers: false,
      };
      expectAllOk(await store.appendMany([batch([envelope("a", 1)], fa, { index: setA })]));
      const beforeA = await visible(store, "a");
      const beforeTimers = await store.dueTimers(Number.MAX_SAFE_INTEGER, 100);
      expect(beforeTimers).toHaveLength(1);
      const { fence: fb } = await acquire(store, "b");
      const batches = [
        batch([sleep("a", 2, "ta2", T0 + 100), envelope("a", 3)], fa, {
          status: "parked",
          index: {
            timersSet: [{ timerId: "ta2", wakeAtMs: T0 + 100 }],
            timersCleared: ["ta"],
            clearAllTimers: false,
          },
        }),
        batch([envelope("b", 0), sleep("b", 1, "tb", T0 + 50)], fb),
        batch(envelopes("c", 0, 1), 7),
      ];
      failing = true;
      await expect(store.appendMany(batches)).rejects.toThrow("injected crash before commit");
      expect(seen.at(-1)).toEqual(batches);
      expect(await visible(store, "a")).toEqual(beforeA);
      expect(await visible(store, "b")).toEqual({ events: [], head: -1, summary: undefined });
      expect((await store.list()).map((x) => x.executionId)).toEqual(["a"]);
      expect(await store.dueTimers(Number.MAX_SAFE_INTEGER, 100)).toEqual(beforeTimers);
      expect(await store.nextWakeAt()).toBe(T0 + 500);

      failing = false;
      const outcomes = await store.appendMany(batches);
      expect(outcomes.map((o) => o.ok)).toEqual([true, true, false]);
      expect(await store.head("a")).toBe(3);
      expect(await store.read("b")).toEqual(batches[1]?.events);
      expect(await store.nextWakeAt()).toBe(T0 + 50);
      const due = await store.dueTimers(Number.MAX_SAFE_INTEGER, 100);
      expect(due.map((t) => t.timerId)).toEqual(["tb", "ta2"]);
    });
  });
}

/** The execution list the batches' `status` and `flow` maintain: filters and paging. */
function listTests(h: Harness): void {
  describe("list", () => {
    async function seed(h: Harness) {
      const store = await h.open();
      await start(store, "x-3", { flow: "beta", status: "running" });
      const f1 = await start(store, "x-1", { flow: "alpha", status: "running" });
      await start(store, "x-2", { flow: "alpha", count: 3, status: "completed" });
      const b = batch(envelopes("x-1", 1, 2), f1, { status: "parked", flow: "ignored" });
      expectAllOk(await store.appendMany([b]));
      return store;
    }

    it("reflects each batch's status, the flow of sequence 0, the head and the times", async () => {
      const store = await seed(h);
      expect(await store.list()).toEqual([
        {
          executionId: "x-1",
          flow: "alpha",
          status: "parked",
          head: 2,
          createdAtMs: T0,
          updatedAtMs: T0 + 20,
        },
        {
          executionId: "x-2",
          flow: "alpha",
          status: "completed",
          head: 2,
          createdAtMs: T0,
          updatedAtMs: T0 + 20,
        },
        {
          executionId: "x-3",
          flow: "beta",
          status: "running",
          head: 0,
          createdAtMs: T0,
          updatedAtMs: T0,
        },
      ]);
    });

    it("filters by status and by flow", async () => {
      const store = await seed(h);
      const ids = async (q: Parameters<typeof store.list>[0]) =>
        (await store.list(q)).map((x) => x.executionId);
      expect(await ids({ status: ["parked"] })).toEqual(["x-1"]);
      expect(await ids({ status: ["completed", "running"] })).toEqual(["x-2", "x-3"]);
      expect(await ids({ status: ["failed"] })).toEqual([]);
      expect(await ids({ status: [] })).toEqual([]);
      expect(await ids({ flow: "alpha" })).toEqual(["x-1", "x-2"]);
      expect(await ids({ flow: "ignored" })).toEqual([]);
      expect(await ids({ flow: "alpha", status: ["completed"] })).toEqual(["x-2"]);
    });

    it("pages by afterId and limit, ordered by id", async () => {
      const store = await seed(h);
      const ids = async (q: Parameters<typeof store.list>[0]) =>
        (await store.list(q)).map((x) => x.executionId);
      expect(await ids({ limit: 2 })).toEqual(["x-1", "x-2"]);
      expect(await ids({ afterId: "x-2", limit: 2 })).toEqual(["x-3"]);
      expect(await ids({ afterId: "x-1" })).toEqual(["x-2", "x-3"]);
      expect(await ids({ afterId: "x-3" })).toEqual([]);
      expect(await ids({ afterId: "x-0", limit: 1, flow: "alpha" })).toEqual(["x-1"]);
      expect(await ids({ afterId: "x-1", limit: 1, flow: "alpha" })).toEqual(["x-2"]);
      expect(await ids({ limit: 0 })).toEqual([]);
    });
  });
}
