/**
 * A run made from a state read back counts its snapshot policy from the snapshot the state was
 * read from (runtime/load-state.ts L2, issue 28): a body resumed without its cache on every turn,
 * as on a fleet or after a restart, writes snapshots as a cached one does, so a load folds a
 * short tail, not the log since the last cached run.
 */
import { describe, expect, it } from "vitest";
import { flow$, memoryStore } from "../src/index.ts";
import { expectReplayEquality, runtimes, until } from "./helpers.ts";

const rt = runtimes();

const chat = flow$("chat", async (ctx) => {
  for (;;) {
    const msg = await ctx.suspend<string>();
    if (msg === "bye") return "done";
    await ctx.run("turn", () => `re: ${msg}`);
  }
});

describe("the snapshot policy of a run made from a state read back (load-state.ts L2)", () => {
  it("L2: resumed uncached on every turn, the log gets snapshots and the tail stays short", async () => {
    const store = memoryStore();
    // Every park evicts the body: each resume reads the state back and replays from the top.
    const r = rt(store, { snapshotEvery: 10, cache: { maxExecutions: 0 } }).registerFlow(chat);
    await r.start("chat", null, { id: "c" });
    const tails: number[] = [];
    for (let t = 0; t < 60; t++) {
      await r.resume("c", `m${t}`);
      await until(async () => (await r.getState("c")).status === "parked");
      const head = await store.head("c");
      tails.push(head - ((await store.loadSnapshot("c"))?.seq ?? -1));
    }
    // 60 turns of 3 events: without L2 no run ever crossed the policy (each counted from its
    // load and appended 3 events), and the last tail was the whole log of 181 events.
    expect(await store.loadSnapshot("c")).toBeDefined();
    // Past the first snapshots the tail never held more than the state's size in bytes allows:
    // a turn adds about as many bytes to the log as to the state, so under half the log.
    const head = await store.head("c");
    expect(tails.at(-1)).toBeLessThan(head / 2);
    expect(Math.max(...tails.slice(30))).toBeLessThan(head / 2);
    await expectReplayEquality(r, "c");
    await r.resume("c", "bye");
    expect((await r.waitForCompletion("c")).output).toBe("done");
  });

  it("L2: a run read back from the log's start counts from its first event", async () => {
    const store = memoryStore();
    // A cached run writes no snapshot below 10 events; eight turns leave 25 events and none.
    const warm = rt(store, { snapshotEvery: 40 }).registerFlow(chat);
    await warm.start("chat", null, { id: "c" });
    for (let t = 0; t < 8; t++) {
      await warm.resume("c", `m${t}`);
      await until(async () => (await warm.getState("c")).status === "parked");
    }
    await warm.close();
    expect(await store.loadSnapshot("c")).toBeUndefined();
    // Another runtime reads it from the start: its first batch crosses a policy of 20 events.
    const cold = rt(store, { snapshotEvery: 20, cache: { maxExecutions: 0 } }).registerFlow(chat);
    await cold.resume("c", "m8");
    await until(async () => (await cold.getState("c")).status === "parked");
    expect((await store.loadSnapshot("c"))?.seq).toBeGreaterThanOrEqual(25);
    await expectReplayEquality(cold, "c");
  });
});
