/**
 * ADR 0109 D8 (3) and (6): the negatives not shown beside their code elsewhere, and a test per
 * consumer of the `continued` status (the fold, the outcome, recovery, listing, routing's
 * refusal, the timeline and the lineage). Retention's reading of `continued` is in
 * chain-retention.test.ts, the CLI's in chain-lineage.test.ts, the simulator's in sim.test.ts.
 */
import { describe, expect, it } from "vitest";
import {
  chainLineage,
  flow$,
  foldAll,
  isLoomError,
  memoryStore,
  timeline,
  type Envelope,
  type Runtime,
  type RuntimeOptions,
  type Store,
} from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const chains = (store: Store, extra: Partial<RuntimeOptions> = {}) =>
  rt(store, { features: { continueAsNew: true }, ...extra });

async function logOf(r: Runtime, id: string): Promise<Envelope[]> {
  await until(async () => (await r.readLog(id)).length > 0);
  return r.readLog(id);
}

/** Generation 0 continues with `carry` once it has received a message; generation 1 ends. */
const once = flow$("once", async (ctx, input: { gen: number } | null) => {
  const msg = await ctx.receive<string>();
  if (input === null) return ctx.continueAsNew({ gen: 1 });
  return { msg, gen: input.gen };
});

describe("ADR 0109 D8 (3): negatives", () => {
  it("D8 (3): a second continuation from a continued predecessor is a no-op: one successor, one commit, and recovery starts nothing", async () => {
    const store = memoryStore();
    const twice = flow$("twice", async (ctx, input: { carry: string } | null) => {
      if (input !== null) return input.carry;
      // A flow that swallows the sentinel still rotates; its second call is the same rotation.
      await ctx.continueAsNew({ carry: "first" }).catch(() => undefined);
      return ctx.continueAsNew({ carry: "second" });
    });
    const r = chains(store).registerFlow(twice);
    await r.start(twice, null, { id: "tw" });
    expect((await r.waitForCompletion("tw")).status).toBe("continued");
    expect((await r.waitForCompletion("tw~1")).output).toBe("first");
    const log = await r.readLog("tw");
    expect(log.filter((e) => e.kind === "EXECUTION_CONTINUED")).toHaveLength(1);
    // A second runtime over the same store finds nothing to re-drive, and starts no ~2.
    const again = chains(store, { background: false }).registerFlow(twice);
    expect(await again.recoverAbandoned()).toEqual([]);
    expect(await store.head("tw~2")).toBe(-1);
    expect(await again.readLog("tw")).toEqual(log);
  });

  it("D8 (3): a call with an outstanding wait is refused before anything is appended, and the flow carries on", async () => {
    const store = memoryStore();
    const waits = flow$("waits", async (ctx) => {
      const sleeping = ctx.sleep(20);
      const code = await ctx
        .continueAsNew(null)
        .then(() => "rotated")
        .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
      await sleeping;
      return code;
    });
    const r = chains(store).registerFlow(waits);
    const h = await r.start(waits, null, { id: "wt" });
    expect((await h.result()).output).toBe("LOOM_CONTINUE_AS_NEW_WAIT_OUTSTANDING");
    expect((await r.readLog("wt")).map((e) => e.kind)).not.toContain("EXECUTION_CONTINUED");
    expect(await store.head("wt~1")).toBe(-1);
  });
});

describe("ADR 0109 D8 (6): every consumer of the continued status", () => {
  it("D8 (6) fold: continued is terminal and not completed; nothing folds after it", async () => {
    const r = chains(memoryStore()).registerFlow(once);
    await r.start(once, null, { id: "fc" });
    await r.send("fc", "go");
    const log = await logOf(r, "fc~1").then(() => r.readLog("fc"));
    const state = foldAll(log);
    expect(state.status).toBe("continued");
    expect(state.output).toBeUndefined();
    expect(state._continuedTo).toBe("fc~1");
    const last = log[log.length - 1];
    if (!last) throw new Error("empty log");
    const after: Envelope = {
      ...last,
      seq: last.seq + 1,
      kind: "EXECUTION_COMPLETED",
      payload: { output: "late" },
      meta: { kernel: true },
    };
    expect(foldAll([...log, after])).toEqual(state);
  });

  it("D8 (6) outcome: waitForCompletion and the handle give continued with the successor, not an output", async () => {
    const r = chains(memoryStore()).registerFlow(once);
    const h = await r.start(once, null, { id: "oc" });
    await r.send("oc", "go");
    expect(await h.result()).toEqual({ status: "continued", continuedTo: "oc~1" });
    // A runtime that did not drive it reads the same outcome from the log.
    const other = chains(r.store, { background: false }).registerFlow(once);
    expect(await other.waitForCompletion("oc")).toEqual({
      status: "continued",
      continuedTo: "oc~1",
    });
  });

  it("D8 (6) recovery and listing: a continued generation is never re-driven, and is listed by its status", async () => {
    const store = memoryStore();
    const r = chains(store).registerFlow(once);
    await r.start(once, null, { id: "rc" });
    await r.send("rc", "go");
    await logOf(r, "rc~1");
    await until(async () => (await r.getState("rc")).status === "continued");
    const other = chains(store, { background: false }).registerFlow(once);
    expect(await other.recoverAbandoned()).not.toContain("rc");
    const listed = await other.list({ status: ["continued"] });
    expect(listed.map((x) => x.executionId)).toEqual(["rc"]);
    expect(
      (await other.list({ status: ["pending", "running"] })).map((x) => x.executionId),
    ).not.toContain("rc");
  });

  it("D8 (6) routing off: with the flag off a continued id is not resumable, named as such", async () => {
    const store = memoryStore();
    const r = chains(store).registerFlow(once);
    await r.start(once, null, { id: "ro" });
    await r.send("ro", "go");
    await logOf(r, "ro~1");
    await until(async () => (await r.getState("ro")).status === "continued");
    const off = rt(store, { background: false }).registerFlow(once);
    await expect(off.resume("ro", "x")).rejects.toMatchObject({ code: "LOOM_NOT_RESUMABLE" });
    await expect(off.send("ro", "x")).rejects.toMatchObject({ code: "LOOM_CHAIN_HOP_LIMIT" });
  });

  it("D8 (6) analytics: the timeline says where it continued, and the lineage places both generations", async () => {
    const r = chains(memoryStore()).registerFlow(once);
    await r.start(once, null, { id: "an" });
    await r.send("an", "go");
    await logOf(r, "an~1");
    await r.send("an", "again");
    await r.waitForCompletion("an~1");
    const first = await r.readLog("an");
    const rows = timeline(first);
    expect(rows[rows.length - 1]?.text).toBe("continued as an~1 (generation 1 of chain an)");
    const lineage = chainLineage([...(await r.readLog("an~1")), ...first], "an~1");
    expect(lineage?.generations.map((g) => [g.executionId, g.status])).toEqual([
      ["an", "continued"],
      ["an~1", "completed"],
    ]);
    expect(lineage?.head).toBe("an~1");
  });
});
