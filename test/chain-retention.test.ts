/**
 * Issue 7: retention of terminal executions by policy (`continued` is terminal for retention),
 * compaction that keeps the pinned kinds, and chain routing that survives both (ADR 0109 D2
 * "Head resolution is ROUTED", D6, D7, residuals (0) and (4)). Tests cite chain-routing.ts
 * K6..K8, retention.ts T1..T4, compaction.ts P1..P4, fork.ts V4 and the store's S13, S14.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  canonicalJson,
  chainLineage,
  chainLineageOfStates,
  createRuntime,
  flow$,
  foldAll,
  isLoomError,
  isTerminalStatus,
  liveKeepSet,
  memoryStore,
  PINNED_KINDS,
  routeKeepSet,
  step$,
  type Envelope,
  type Runtime,
  type RuntimeOptions,
  type Store,
} from "../src/index.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { routeToHead } from "../src/runtime/chain-routing.ts";
import { showCommand } from "../src/cli/commands/show.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { mulberry32, offsetClock, until } from "./helpers.ts";

const open: Runtime[] = [];
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
afterEach(async () => {
  for (const r of open) await expectLoadsEqualLogs(r);
  await Promise.all(open.splice(0).map((r) => r.close()));
});

/** A runtime with chains on, over `store` (not closed with it), closed after the test. */
function chains(store: Store, extra: Partial<RuntimeOptions> = {}): Runtime {
  const r = createRuntime({
    store,
    closeStore: false,
    pollIntervalMs: 20,
    features: { continueAsNew: true },
    ...extra,
  });
  open.push(r);
  return r;
}

/**
 * G1 where it can be checked whole: for every ended execution whose log is dense from 0, the
 * fold of the log equals the loaded state. A compacted log cannot be folded whole (P3).
 */
async function expectLoadsEqualLogs(r: Runtime): Promise<void> {
  await r.journal.drain();
  for (const x of await r.list()) {
    if (!isTerminalStatus(x.status) && x.status !== "parked") continue;
    const log = await r.store.read(x.executionId);
    if (!log.every((e, i) => e.seq === i)) continue;
    const as = (log[0]?.payload as { principal?: unknown } | undefined)?.principal;
    const state = await r.getState(x.executionId, typeof as === "string" ? { as } : {});
    expect(canonicalJson(foldAll(log)), x.executionId).toBe(canonicalJson(state));
  }
}

const genId = (chainId: string, n: number) => (n === 0 ? chainId : `${chainId}~${n}`);
const genOf = (id: string) => Number(/~(\d+)$/.exec(id)?.[1] ?? 0);
const seqs = (log: readonly Envelope[]) => log.map((e) => e.seq);
const HOUR = 3_600_000;

/** Rotates straight to generation `n`, which then waits for a message and returns it. */
const hops = (n: number) =>
  flow$(`hops-${n}`, async (ctx, input: { gen: number } | null) => {
    const gen = input?.gen ?? 0;
    if (gen < n) return ctx.continueAsNew({ gen: gen + 1 });
    return ctx.receive<string>();
  });

/**
 * Rotates until its generation reaches the last target it was sent, then waits for the next
 * target; "stop" ends the chain (completed).
 */
const ladder = flow$("ladder", async (ctx, input: { gen: number; target: number } | null) => {
  const gen = input?.gen ?? 0;
  let target = input?.target ?? 0;
  while (target <= gen) {
    const m = await ctx.receive<number | "stop">();
    if (m === "stop") return { gen };
    target = m;
  }
  return ctx.continueAsNew({ gen: gen + 1, target });
});

async function parkedAt(r: Runtime, id: string, as?: string): Promise<void> {
  await until(
    async () =>
      (await r.store.head(id)) >= 0 &&
      (await r.getState(id, as === undefined ? {} : { as }).catch(() => null))?.status === "parked",
    20_000,
  );
}

/** A store that counts `read` and `head` calls and records the ids they touch. */
function counting(inner: Store) {
  let reads = 0;
  const touched: string[] = [];
  const store = new Proxy(inner, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver) as unknown;
      if ((key !== "read" && key !== "head") || typeof v !== "function") return v;
      return (id: string, ...rest: unknown[]) => {
        reads++;
        touched.push(id);
        return (v as (...a: unknown[]) => unknown).apply(target, [id, ...rest]);
      };
    },
  });
  return {
    store,
    reads: () => reads,
    touched: () => [...touched],
    reset: () => {
      reads = 0;
      touched.length = 0;
    },
  };
}

/** A runtime that has routed nothing yet (no remembered heads), reading through `store`. */
function fresh(store: Store): Runtime {
  return chains(store, { background: false });
}

describe("routing reads a fixed set of generations (ADR 0109 D2, residual (0); K6..K8)", () => {
  it("acceptance: a 200-generation chain routes in at most 60 store reads, a 10,000-generation one in at most 2·log2(10,000) + 10", async () => {
    // Built with real rotations (about 1.5 s for 10,000 on the memory store).
    for (const [n, bound] of [
      [200, 60],
      [10_000, Math.floor(2 * Math.log2(10_000) + 10)],
    ] as const) {
      const data = memoryStore();
      const f = hops(n);
      const writer = chains(data).registerFlow(f);
      await writer.start(f, null, { id: `acc-${n}` });
      await parkedAt(writer, `acc-${n}~${n}`);
      const c = counting(data);
      const reader = fresh(c.store);
      for (const from of [0, Math.floor(n / 2), n - 1]) {
        c.reset();
        expect(await reader.followToHead(genId(`acc-${n}`, from))).toBe(`acc-${n}~${n}`);
        expect(c.reads(), `${n} generations, routed from generation ${from}`).toBeLessThanOrEqual(
          bound,
        );
      }
    }
  });

  it("K7: from generation 0 routing reads exactly routeKeepSet(head); from any other, no generation outside it but the addressed one", async () => {
    const n = 77;
    const data = memoryStore();
    const f = hops(n);
    const writer = chains(data).registerFlow(f);
    await writer.start(f, null, { id: "k7" });
    await parkedAt(writer, `k7~${n}`);
    const c = counting(data);
    const keep = routeKeepSet(n);
    for (let from = 0; from <= n; from++) {
      c.reset();
      expect(await routeToHead({ store: c.store, maxChainHops: 8 }, genId("k7", from))).toBe(
        `k7~${n}`,
      );
      // The generations with a log that routing read (the probe past the head has none).
      const read = [...new Set(c.touched().map(genOf))].filter((g) => g <= n).sort((a, b) => a - b);
      if (from === 0) expect(read).toEqual(keep);
      else expect(read.filter((g) => g !== from && !keep.includes(g))).toEqual([]);
    }
  });

  it("K8: liveKeepSet(head) holds every generation at or below head that routing reads for any later head", () => {
    const missing: string[] = [];
    for (let head = 0; head <= 300; head++) {
      const live = new Set(liveKeepSet(head));
      if (!live.has(0) || !live.has(head)) missing.push(`head ${head}: 0 or itself`);
      for (let later = head; later <= 2 * head + 3; later++) {
        for (const g of routeKeepSet(later)) {
          if (g <= head && !live.has(g)) missing.push(`head ${head}, later ${later}: ${g}`);
        }
      }
    }
    expect(missing).toEqual([]);
    expect(routeKeepSet(0)).toEqual([0]);
    expect(routeKeepSet(100)).toEqual([0, 1, 2, 4, 8, 16, 32, 64, 96, 99, 100]);
  });
});

describe("retention (retention.ts T1..T4, store S13)", () => {
  it("T1..T3, seeded: after retention by policy, and after rotations that go on after it, every surviving id of a chain routes to its head", async () => {
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const rand = mulberry32(seed);
      const clock = offsetClock();
      const data = memoryStore();
      const r = chains(data, { clock }).registerFlow(ladder);
      const chainId = `lad-${seed}`;
      await r.start(ladder, null, { id: chainId });
      let head = 0;
      const check = async (what: string) => {
        const survivors = (await data.list())
          .map((x) => x.executionId)
          .filter((id) => id === chainId || id.startsWith(`${chainId}~`));
        const reader = fresh(data);
        for (const id of survivors) {
          const routed = await reader.followToHead(id).catch((e: unknown) => String(e));
          expect(routed, `seed ${seed}, ${what}: ${id} no longer routes to the head`).toBe(
            genId(chainId, head),
          );
        }
        return survivors;
      };
      const rounds = 3 + Math.floor(rand() * 5);
      for (let round = 0; round < rounds; round++) {
        head += 1 + Math.floor(rand() * 40);
        await r.send(chainId, head);
        await parkedAt(r, genId(chainId, head));
        await check(`round ${round}, after the rotations`);
        clock.advance(HOUR);
        if (rand() < 0.3) continue;
        const policy = {
          terminalOlderThanMs: HOUR * Math.floor(rand() * 3) + HOUR / 2,
          ...(rand() < 0.3 ? { statuses: ["continued" as const] } : {}),
        };
        const before = new Map((await data.list()).map((x) => [x.executionId, x]));
        const cutoffMs = clock.now() - policy.terminalOlderThanMs;
        const released = await r.applyRetention(policy);
        const live = new Set(liveKeepSet(head));
        for (const id of released) {
          const was = before.get(id);
          // T1: only terminal, old enough, of a status the policy names; and whole (S13).
          expect(was && isTerminalStatus(was.status), `seed ${seed}: released ${id}`).toBe(true);
          expect(was?.updatedAtMs ?? Infinity).toBeLessThanOrEqual(cutoffMs);
          expect(live.has(genOf(id)), `seed ${seed}: released ${id} of the keep set`).toBe(false);
          expect(await data.head(id)).toBe(-1);
          expect(await data.loadSnapshot(id)).toBeUndefined();
          expect(await data.getLease(id)).toBeUndefined();
        }
        const survivors = await check(`round ${round}, after retention`);
        for (const g of live) {
          if (g <= head) expect(survivors, `seed ${seed}`).toContain(genId(chainId, g));
        }
      }
      // The chain ends: its routing set stays (the head included), everything else may go.
      await r.send(chainId, "stop");
      await until(async () => (await r.getState(genId(chainId, head))).status === "completed");
      clock.advance(HOUR);
      await r.applyRetention({ terminalOlderThanMs: 0 });
      const survivors = await check("after the chain ended");
      expect(
        survivors.map(genOf).sort((a, b) => a - b),
        `seed ${seed}`,
      ).toEqual(routeKeepSet(head));
    }
  });

  it("T1, T4: never a live execution; a lone ended one and only the statuses named; a malformed policy is refused first", async () => {
    const clock = offsetClock();
    const data = memoryStore();
    const r = chains(data, { clock });
    const done = flow$("done", async (ctx, input: string) => ctx.run("echo", () => input));
    const fails = flow$("fails", async () => {
      throw new Error("no");
    });
    const waits = flow$("waits", async (ctx) => ctx.suspend<string>());
    await (await r.start(done, "a", { id: "lone-done" })).result();
    await (await r.start(fails, null, { id: "lone-failed" })).result();
    await r.start(waits, null, { id: "lone-parked" });
    await parkedAt(r, "lone-parked");
    await expect(r.applyRetention({ terminalOlderThanMs: -1 })).rejects.toMatchObject({
      code: "LOOM_INVALID_INPUT",
    });
    await expect(
      r.applyRetention({ terminalOlderThanMs: 0, statuses: ["parked"] }),
    ).rejects.toMatchObject({ code: "LOOM_INVALID_INPUT" });
    expect((await data.list()).length).toBe(3);
    clock.advance(HOUR);
    await (await r.start(done, "b", { id: "young-done" })).result();
    expect(await r.applyRetention({ terminalOlderThanMs: HOUR / 2, statuses: ["failed"] })).toEqual(
      ["lone-failed"],
    );
    expect(await r.applyRetention({ terminalOlderThanMs: HOUR / 2 })).toEqual(["lone-done"]);
    expect((await data.list()).map((x) => x.executionId)).toEqual(["lone-parked", "young-done"]);
    await expect(r.getState("lone-done")).rejects.toMatchObject({ code: "LOOM_NOT_FOUND" });
    await r.resume("lone-parked", "still here");
    expect((await r.waitForCompletion("lone-parked")).output).toBe("still here");
  });

  it("T2, residual (0): an ended chain keeps routeKeepSet(head); a released generation is not found, and its chain's inbox stays", async () => {
    const clock = offsetClock();
    const data = memoryStore();
    const n = 20;
    const f = hops(n);
    const r = chains(data, { clock }).registerFlow(f);
    await r.start(f, null, { id: "ended" });
    await parkedAt(r, `ended~${n}`);
    await r.send("ended", "bye");
    expect((await r.waitForCompletion(`ended~${n}`)).output).toBe("bye");
    clock.advance(HOUR);
    const released = await r.applyRetention({ terminalOlderThanMs: HOUR / 2 });
    const keep = routeKeepSet(n);
    expect(released.map(genOf).sort((a, b) => a - b)).toEqual(
      Array.from({ length: n + 1 }, (_, g) => g).filter((g) => !keep.includes(g)),
    );
    for (const g of keep) expect(await r.followToHead(genId("ended", g))).toBe(`ended~${n}`);
    await expect(r.followToHead("ended~3")).rejects.toMatchObject({ code: "LOOM_NOT_FOUND" });
    await expect(r.send("ended", "late")).rejects.toMatchObject({ code: "LOOM_NOT_RESUMABLE" });
    expect((await data.readMessages("ended", "main", -1, 10)).map((m) => m.payload)).toEqual([
      "bye",
    ]);
    // Nothing more to release: the routing set of an ended chain stays.
    expect(await r.applyRetention({ terminalOlderThanMs: 0 })).toEqual([]);
  });

  it("ADR 0111: a head remembered for an id is not reached through it once the id was released", async () => {
    const clock = offsetClock();
    const data = memoryStore();
    const f = hops(6);
    const r = chains(data, { clock }).registerFlow(f);
    await r.start(f, null, { id: "owned", principal: "alice" });
    await parkedAt(r, "owned~6", "alice");
    expect(await r.followToHead("owned~3", { as: "alice" })).toBe("owned~6");
    clock.advance(HOUR);
    // Another process releases owned~3 (not in the keep set); this runtime still remembers it.
    const other = chains(data, { clock, background: false });
    expect(await other.applyRetention({ terminalOlderThanMs: 0 })).toContain("owned~3");
    // An anonymous caller passes the check of an id with no log, but reaches nothing.
    await expect(r.followToHead("owned~3")).rejects.toMatchObject({ code: "LOOM_NOT_FOUND" });
    await expect(r.send("owned~3", "in")).rejects.toMatchObject({ code: "LOOM_NOT_FOUND" });
    await expect(r.send("owned", "in")).rejects.toMatchObject({ code: "LOOM_UNAUTHORIZED" });
  });
});

describe("compaction (compaction.ts P1..P4, store S14)", () => {
  const spend = step$("spend-c", async (tokens: number, ectx) => {
    ectx.meter({ tokens: { output: tokens } });
    return tokens;
  });
  /** Two steps, a refused spend (QUOTA_EXCEEDED), a decision and two suspends. */
  const notebook = flow$(
    "notebook",
    async (ctx) => {
      const a = await ctx.run("a", () => 1);
      const code = async () =>
        ctx
          .execute(spend, 60, { retry: false })
          .then(String)
          .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
      // The third is refused: the first two spent 120 of 100 (admission checks what was spent).
      const spent = [await code(), await code(), await code()];
      const first = await ctx.suspend<string>();
      const b = await ctx.run("b", () => `${first}!`);
      const second = await ctx.suspend<string>();
      return { a, spent, b, second };
    },
    { budget: { tokens: 100 } },
  );

  it("P1..P3: a compacted execution loads, resumes and ends as it would have; readLog returns the gapped log with the pinned kinds", async () => {
    const data = memoryStore();
    const r = chains(data).registerFlow(notebook);
    await r.start(notebook, null, { id: "nb" });
    await parkedAt(r, "nb");
    const log = await r.readLog("nb");
    expect(log.map((e) => e.kind)).toContain("QUOTA_EXCEEDED");
    const before = canonicalJson(await r.getState("nb"));
    const done = await r.compact("nb", { snapshotFirst: true, keepKinds: ["SUSPENDED"] });
    expect(done.throughSeq).toBe(log.length - 1);
    const after = await r.readLog("nb");
    const kept = new Set<string>([...PINNED_KINDS, "SUSPENDED"]);
    expect(after).toEqual(log.filter((e, i) => i === log.length - 1 || kept.has(e.kind)));
    expect(done.removed).toBe(log.length - after.length);
    expect(done.removed).toBeGreaterThan(0);
    expect(seqs(after)).not.toEqual(seqs(after).map((_, i) => i));
    expect(await data.head("nb")).toBe(log.length - 1);
    // P1: state from snapshot plus tail, in this runtime and in a fresh one.
    expect(canonicalJson(await r.getState("nb"))).toBe(before);
    expect(canonicalJson(await fresh(data).getState("nb"))).toBe(before);
    // P3: a fold of the whole gapped log stops at the gap; loading never does that.
    expect(foldAll(after).seq).toBeLessThan(log.length - 1);
    await r.resume("nb", "x");
    await parkedAt(r, "nb");
    await r.resume("nb", "y");
    expect((await r.waitForCompletion("nb")).output).toEqual({
      a: 1,
      spent: ["60", "60", "LOOM_QUOTA_EXCEEDED"],
      b: "x!",
      second: "y",
    });
  });

  it("P1, W2: a body cached here is dropped when the tail it would absorb has a gap; the execution recovers from the snapshot", async () => {
    const data = memoryStore();
    const a = chains(data, { background: false, leaseTtlMs: 200 }).registerFlow(notebook);
    await a.start(notebook, null, { id: "gap" });
    await parkedAt(a, "gap");
    // Another process, without the flow, answers both suspends and compacts: the tail the
    // cached body here would read holds only the last RESUMED, after a gap.
    const b = chains(data, { background: false, leaseTtlMs: 200 });
    await b.resume("gap", "x");
    await b.resume("gap", "y");
    const compaction = await b.compact("gap", { snapshotFirst: true });
    expect(compaction.removed).toBeGreaterThan(0);
    await until(async () => {
      await a.recoverAbandoned();
      return (await a.getState("gap")).status === "completed";
    });
    expect((await a.waitForCompletion("gap")).output).toEqual({
      a: 1,
      spent: ["60", "60", "LOOM_QUOTA_EXCEEDED"],
      b: "x!",
      second: "y",
    });
  });

  it("P2, D6: compacted generations still name their successors; routing and lineage from snapshot plus tail see the whole chain", async () => {
    const data = memoryStore();
    const f = hops(3);
    const r = chains(data).registerFlow(f);
    await r.start(f, null, { id: "cc" });
    await parkedAt(r, "cc~3");
    const ids = [0, 1, 2, 3].map((g) => genId("cc", g));
    const whole = chainLineage((await Promise.all(ids.map((id) => r.readLog(id)))).flat(), "cc");
    for (const id of ids) await r.compact(id, { snapshotFirst: true });
    for (const id of ids.slice(0, 3)) {
      const last = (await r.readLog(id)).at(-1);
      expect(last?.kind).toBe("EXECUTION_CONTINUED");
      expect(await r.followToHead(id)).toBe("cc~3");
    }
    const states = new Map(
      await Promise.all(ids.map(async (id) => [id, await r.getState(id)] as const)),
    );
    expect(chainLineageOfStates(states, "cc~1")).toEqual(whole);
    expect(whole?.generations.map((g) => g.status)).toEqual([
      "continued",
      "continued",
      "continued",
      "parked",
    ]);
    await r.send("cc", "after compaction");
    expect((await r.waitForCompletion("cc~3")).output).toBe("after compaction");
  });

  it("loom show on SQLite: a compacted generation shows its gapped log and folded state; the lineage ends where retention released a generation", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-retention-"));
    dirs.push(dir);
    const clock = offsetClock();
    const f = hops(5);
    const r = chains(sqliteStore(join(dir, "loom.db")), { clock, closeStore: true });
    r.registerFlow(f);
    await r.start(f, null, { id: "sh" });
    await parkedAt(r, "sh~5");
    for (let g = 0; g <= 5; g++) await r.compact(genId("sh", g), { snapshotFirst: true });
    const show = async (id: string) => {
      const out: string[] = [];
      const io = {
        out: (t: string) => void out.push(t),
        err: () => undefined,
        cwd: dir,
        debug: false,
      };
      expect(await showCommand({ name: "show", db: "loom.db", id, json: true }, io)).toBe(0);
      return JSON.parse(out.join("\n")) as {
        state: { status: string };
        events: Envelope[];
        chain?: { generations: { executionId: string; status: string }[] };
      };
    };
    const two = await show("sh~2");
    expect(two.state.status).toBe("continued");
    expect(two.events.map((e) => e.kind)).toEqual(["EXECUTION_STARTED", "EXECUTION_CONTINUED"]);
    expect(two.chain?.generations.map((g) => g.status)).toEqual([
      ...Array.from({ length: 5 }, () => "continued"),
      "parked",
    ]);
    clock.advance(HOUR);
    // liveKeepSet(5) is 0, 1, 2, 4, 5: generation 3 goes.
    expect(await r.applyRetention({ terminalOlderThanMs: 0 })).toEqual(["sh~3"]);
    expect((await show("sh~5")).chain?.generations.map((g) => g.executionId)).toEqual([
      "sh~4",
      "sh~5",
    ]);
    expect(await r.followToHead("sh~1")).toBe("sh~5");
  });

  it("V4, residual (4): a fork point whose prefix is not dense from 0 is CompactedForkPointError, before anything is written", async () => {
    const data = memoryStore();
    const r = chains(data).registerFlow(notebook);
    await r.start(notebook, null, { id: "fk" });
    await parkedAt(r, "fk");
    const head = (await r.readLog("fk")).length - 1;
    await r.compact("fk", { snapshotFirst: true });
    for (const at of [1, 2, head - 1, head]) {
      await expect(r.fork("fk", at, `fk-${at}`)).rejects.toMatchObject({
        code: "LOOM_COMPACTED_FORK_POINT",
      });
      expect(await data.head(`fk-${at}`)).toBe(-1);
    }
    // Sequence 0 alone is still a whole prefix.
    await r.fork("fk", 0, "fk-0");
    const [start] = await r.readLog("fk-0");
    expect(start?.payload).toEqual((await r.readLog("fk"))[0]?.payload);
  });

  it("P4: refusals come first: no snapshot, an unknown kind, no log, another principal's execution", async () => {
    const data = memoryStore();
    const r = chains(data, { snapshotEvery: 1_000_000 }).registerFlow(notebook);
    await r.start(notebook, null, { id: "p4", principal: "alice" });
    await parkedAt(r, "p4", "alice");
    const log = await r.readLog("p4", { as: "alice" });
    await expect(r.compact("p4", { as: "alice" })).rejects.toMatchObject({
      code: "LOOM_COMPACTION_WITHOUT_SNAPSHOT",
    });
    await expect(
      r.compact("p4", { as: "alice", keepKinds: ["NOT_A_KIND" as "STEP_STARTED"] }),
    ).rejects.toMatchObject({ code: "LOOM_INVALID_INPUT" });
    await expect(r.compact("p4", { snapshotFirst: true })).rejects.toMatchObject({
      code: "LOOM_UNAUTHORIZED",
    });
    await expect(r.compact("nobody")).rejects.toMatchObject({ code: "LOOM_NOT_FOUND" });
    expect(await r.readLog("p4", { as: "alice" })).toEqual(log);
    expect(await data.loadSnapshot("p4")).toBeUndefined();
  });
});
