/**
 * ADR 0109 D7 (a fork of a chain member leaves the chain), fork.ts V1..V4, and ADR 0111 as ADR
 * 0109 relies on it (one chain, one owner).
 */
import { describe, expect, it } from "vitest";
import { flow$, memoryStore, step$, type Envelope, type Runtime } from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const chains = (extra = {}) => rt(memoryStore(), { features: { continueAsNew: true }, ...extra });

/** Rotates after its first message; generation 1 receives and then spends, then waits. */
const member = flow$("member", async (ctx, carry: { gen: number } | null) => {
  const gen = carry?.gen ?? 0;
  const first = await ctx.receive<string>();
  if (gen === 0) return ctx.continueAsNew({ gen: 1 });
  const second = await ctx.receive<string>();
  return { gen, first, second };
});

async function generation(r: Runtime, id: string, as?: string): Promise<void> {
  await until(async () => (await r.store.read(id, 0, 1)).length > 0);
  if (as !== undefined) await r.getState(id, { as });
}

const consumedBy = (log: Envelope[]) =>
  log
    .filter((e) => e.kind === "MESSAGE_CONSUMED" && e.meta?.forkedFrom === undefined)
    .map((e) => (e.payload as { payload: unknown }).payload);

describe("fork (fork.ts V1..V4, ADR 0109 D7)", () => {
  it("V1, V3: a fork copies the prefix and runs on from it, with an inbox of its own", async () => {
    const f = flow$("two-receives", async (ctx) => [
      await ctx.receive<string>(),
      await ctx.run("middle", () => "m"),
      await ctx.receive<string>(),
    ]);
    const r = rt(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "src" });
    await r.send("src", "a");
    await until(async () => (await r.getState("src")).status === "parked");
    const log = await r.readLog("src");
    const at = log.findIndex((e) => e.kind === "STEP_COMPLETED");
    const fork = await r.fork("src", at, "src-fork");
    expect((await r.readLog("src-fork")).slice(0, at + 1).map((e) => e.kind)).toEqual(
      log.slice(0, at + 1).map((e) => e.kind),
    );
    // The owner's next message is the owner's; the fork reads its own stream from the start.
    await r.send("src", "b");
    await r.send("src-fork", "c");
    expect((await r.waitForCompletion("src")).output).toEqual(["a", "m", "b"]);
    expect((await fork.result()).output).toEqual(["a", "m", "c"]);
    await expect(r.fork("src", at, "src-fork")).rejects.toMatchObject({
      code: "LOOM_EXECUTION_CONFLICT",
    });
  });

  it("D7, D8 (3), fix round 1 (7): a fork of a chain member gets a fresh chain, keeps what was spent, and never reads the owner's inbox", async () => {
    const spend = step$("spend", async (n: number, ectx) => {
      ectx.meter({ tokens: { output: n } });
      return n;
    });
    const f = flow$("spend-member", async (ctx, carry: { gen: number } | null) => {
      const gen = carry?.gen ?? 0;
      await ctx.execute(spend, 10);
      if (gen === 0) return ctx.continueAsNew({ gen: 1 });
      return ctx.receive<string>();
    });
    const r = chains().registerFlow(f);
    await r.start(f, null, { id: "ch" });
    await generation(r, "ch~1");
    await until(async () => (await r.getState("ch~1")).status === "parked");
    const at = (await r.readLog("ch~1")).length - 1;
    await r.fork("ch~1", at, "ch-fork");
    const state = await r.getState("ch-fork");
    expect(state._chain).toEqual({ chainId: "ch-fork", generation: 0 });
    expect(state._resources?.tokens).toEqual({ output: 20 }); // carried 10 + its own 10
    expect(state._inbox).toBeUndefined();
    await r.send("ch", "to the owner");
    await r.send("ch-fork", "to the fork");
    expect((await r.waitForCompletion("ch~1")).output).toBe("to the owner");
    expect((await r.waitForCompletion("ch-fork")).output).toBe("to the fork");
    expect(consumedBy(await r.readLog("ch-fork"))).toEqual(["to the fork"]);
    expect(await r.followToHead("ch-fork")).toBe("ch-fork");
  });

  it("D7: a fork of a chain member that rotates starts <fork-id>~1; cancelling the original chain leaves it alone", async () => {
    const r = chains().registerFlow(member);
    await r.start(member, null, { id: "orig" });
    await until(async () => (await r.getState("orig")).status === "parked");
    const forkPoint = (await r.readLog("orig")).length - 1; // waiting for its first message
    await r.fork("orig", forkPoint, "forked");
    await r.send("forked", "go");
    await generation(r, "forked~1");
    const s1 = await r.getState("forked~1");
    expect(s1._chain?.chainId).toBe("forked");
    expect(s1._chain?.continuedFrom?.executionId).toBe("forked");
    expect(await r.cancel("orig", "stop")).toBe(true);
    expect((await r.getState("forked~1")).status).toBe("parked");
    expect(await r.followToHead("forked")).toBe("forked~1");
  });

  it("V4, D8 (3): refusals (a fork point at or after EXECUTION_CONTINUED, a successor-shaped id) come before anything is written", async () => {
    const r = chains().registerFlow(member);
    await r.start(member, null, { id: "p" });
    await r.send("p", "one");
    await generation(r, "p~1");
    const log = await r.readLog("p");
    const continued = log.findIndex((e) => e.kind === "EXECUTION_CONTINUED");
    await expect(r.fork("p", continued, "p-late")).rejects.toMatchObject({
      code: "LOOM_FORK_PAST_CONTINUATION",
      details: { successorId: "p~1" },
    });
    await expect(r.fork("p", 0, "foo~3")).rejects.toMatchObject({
      code: "LOOM_RESERVED_SUCCESSOR_ID",
    });
    await expect(r.fork("p", 999, "p-far")).rejects.toMatchObject({ code: "LOOM_INVALID_INPUT" });
    await expect(r.fork("p", -1, "p-neg")).rejects.toMatchObject({ code: "LOOM_INVALID_INPUT" });
    await expect(r.fork("nobody", 0, "x")).rejects.toMatchObject({ code: "LOOM_NOT_FOUND" });
    for (const id of ["p-late", "foo~3", "p-far", "p-neg", "x"]) {
      expect(await r.readLog(id)).toEqual([]);
    }
  });
});

describe("principals: one chain, one owner (ADR 0111 as ADR 0109 relies on it)", () => {
  it("fix round 1 (6), ADR 0111: an owned execution refuses other callers (send included) before any chain read; its owner passes", async () => {
    const store = memoryStore();
    const r = rt(store, { features: { continueAsNew: true } }).registerFlow(member);
    await r.start(member, null, { id: "own", principal: "alice" });
    await r.send("own", "hi", { as: "alice" });
    await generation(r, "own~1");
    // Every generation inherits the owner.
    expect((await r.getState("own~1", { as: "alice" }))._principal).toBe("alice");
    const reads: string[] = [];
    const watched = new Proxy(store, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (typeof v !== "function") return v;
        return (...args: unknown[]) => {
          reads.push(`${String(key)}(${String(args[0])})`);
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const other = rt(watched, { features: { continueAsNew: true }, background: false });
    for (const act of [
      () => other.send("own", "x", { as: "mallory" }),
      () => other.resume("own", "x"),
      () => other.cancel("own", "no", { as: "mallory" }),
      () => other.fork("own", 0, "stolen", { as: "mallory" }),
      () => other.readLog("own~1"),
      () => other.getState("own", { as: "bob" }),
      () => other.followToHead("own", { as: "mallory" }),
    ]) {
      reads.length = 0;
      await expect(act()).rejects.toMatchObject({ code: "LOOM_UNAUTHORIZED" });
      // Only the addressed id was read: nothing of the chain beyond it.
      expect(reads.every((x) => x.endsWith("(own)") || x.endsWith("(own~1)"))).toBe(true);
      expect(reads.some((x) => x.includes("own~2"))).toBe(false);
    }
    expect(await store.readMessages("own", "main", 0, 10)).toEqual([]);
    expect(await r.readLog("stolen")).toEqual([]);
    expect(await r.cancel("own", "done", { as: "alice" })).toBe(true);
    expect((await r.getState("own~1", { as: "alice" })).status).toBe("cancelled");
  });

  it("an idempotent start by another principal is refused; a principal is a short string", async () => {
    const f = flow$("owned", async () => 1);
    const r = rt(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "o1", principal: "alice" });
    await expect(r.start(f, null, { id: "o1", principal: "bob" })).rejects.toMatchObject({
      code: "LOOM_UNAUTHORIZED",
    });
    await expect(r.start(f, null, { id: "o2", principal: "" })).rejects.toMatchObject({
      code: "LOOM_INVALID_INPUT",
    });
    expect(await r.readLog("o2")).toEqual([]);
  });
});
