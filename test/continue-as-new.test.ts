/**
 * ADR 0109: ctx.continueAsNew, chains of generations, and the chain inbox they rely on (ADR
 * 0110). Tests cite the seed's sections (D1..D8, fix rounds) and the invariants of
 * continuation.ts (K1..K6) and inbox.ts (N1..N4).
 */
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  ContinueAsNewUnavailableError,
  createRuntime,
  EXECUTION_STATUSES,
  foldAll,
  flow$,
  isLoomError,
  isTerminalStatus,
  memoryStore,
  step$,
  type AppendBatch,
  type Envelope,
  type Runtime,
  type RuntimeOptions,
  type Store,
} from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";
import { forge, gated, waitForGeneration } from "./support/chains.ts";
import { loadState } from "../src/runtime/load-state.ts";

const rt = runtimes();
const chains = (store: Store, extra: Partial<RuntimeOptions> = {}) =>
  rt(store, { features: { continueAsNew: true }, ...extra });

/** A conversation that continues every `every` turns and ends after `last` turns. */
function conversation(every: number, last = Infinity) {
  return flow$("conversation", async (ctx, input: { turn: number; heard: string[] } | null) => {
    let turn = input?.turn ?? 0;
    const heard = input?.heard ?? [];
    for (;;) {
      const msg = await ctx.receive<string>();
      heard.push(await ctx.run("reply", () => msg.toUpperCase()));
      turn++;
      if (turn >= last) return { turn, heard };
      if (turn % every === 0) return ctx.continueAsNew({ turn, heard });
    }
  });
}

const kinds = (log: Envelope[]) => log.map((e) => e.kind);

/** Every message sequence number consumed (not as a duplicate) across `logs`. */
function consumed(logs: Envelope[][]): number[] {
  return logs
    .flat()
    .filter((e) => e.kind === "MESSAGE_CONSUMED")
    .map((e) => e.payload as { seq: number; duplicate?: boolean })
    .filter((p) => p.duplicate !== true)
    .map((p) => p.seq)
    .sort((a, b) => a - b);
}

async function generations(r: Runtime, chainId: string): Promise<string[]> {
  const ids = [chainId];
  for (let n = 1; (await r.readLog(`${chainId}~${n}`)).length > 0; n++) ids.push(`${chainId}~${n}`);
  return ids;
}

describe("the chain inbox: send and receive (ADR 0110 as ADR 0109 relies on it)", () => {
  it("delivers messages in order, each once, whether sent before or while the flow waits", async () => {
    const f = flow$("inbox", async (ctx) => {
      const got: string[] = [];
      for (let i = 0; i < 4; i++) got.push(await ctx.receive<string>());
      return got;
    });
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "in-1" });
    await r.send("in-1", "a");
    await r.send("in-1", "b");
    await until(async () => (await r.getState("in-1")).status === "parked");
    await r.send("in-1", "c");
    await r.send("in-1", "d");
    expect((await h.result()).output).toEqual(["a", "b", "c", "d"]);
    expect(consumed([await r.readLog("in-1")])).toEqual([0, 1, 2, 3]);
  });

  it("N1: a message whose key was consumed is dropped, so a sender may retry", async () => {
    const f = flow$("dedupe", async (ctx) => [
      await ctx.receive<string>(),
      await ctx.receive<string>(),
    ]);
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "dd-1" });
    await r.send("dd-1", "first", { key: "k1" });
    await r.send("dd-1", "first again", { key: "k1" });
    await r.send("dd-1", "second", { key: "k2" });
    expect((await h.result()).output).toEqual(["first", "second"]);
    const log = await r.readLog("dd-1");
    const dup = log.find((e) => (e.payload as { duplicate?: boolean }).duplicate === true);
    expect(dup?.payload).toMatchObject({ seq: 1, key: "k1", duplicate: true });
  });

  it("topics are read apart; a receive with a timeout throws SuspendTimeoutError", async () => {
    const f = flow$("topics", async (ctx) => {
      const urgent = await ctx.receive<string>({ topic: "urgent" });
      const late = await ctx
        .receive<string>({ topic: "never", timeout: 50 })
        .catch((e: unknown) => (isLoomError(e, "LOOM_SUSPEND_TIMEOUT") ? "timed out" : "other"));
      const main = await ctx.receive<string>();
      return { urgent, late, main };
    });
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "tp-1" });
    await r.send("tp-1", "m");
    await r.send("tp-1", "u", { topic: "urgent" });
    expect((await h.result()).output).toEqual({ urgent: "u", late: "timed out", main: "m" });
  });

  it("N4: bad input is refused before anything is appended to the stream", async () => {
    const f = flow$("idle", async (ctx) => ctx.receive());
    const r = rt(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "bad-1" });
    await expect(r.send("bad-1", "x", { topic: "" })).rejects.toThrow(/send topic/);
    await expect(r.send("bad-1", "x", { key: 7 as unknown as string })).rejects.toThrow(/send key/);
    await expect(r.send("bad-1", () => 1)).rejects.toThrow(/no JSON form|JSON/);
    await expect(r.send("nobody", "x")).rejects.toThrow(/no execution/);
    expect(await r.store.readMessages("bad-1", "main", -1, 10)).toEqual([]);
    await r.cancel("bad-1");
    await expect(r.send("bad-1", "x")).rejects.toThrow(/never be received/);
  });
});

describe("ctx.continueAsNew (ADR 0109)", () => {
  it("D1, D2: rotates every n turns; each generation's log is bounded, every message is consumed once", async () => {
    const f = conversation(3, 7);
    const r = chains(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "chat" });
    for (let i = 0; i < 7; i++) await r.send("chat", `m${i}`);
    const first = await h.result();
    expect(first).toEqual({ status: "continued", continuedTo: "chat~1" });
    await waitForGeneration(r, "chat", 2);
    const head = await r.followToHead("chat");
    expect(head).toBe("chat~2");
    const end = await r.waitForCompletion(head);
    expect(end.output).toEqual({ turn: 7, heard: ["M0", "M1", "M2", "M3", "M4", "M5", "M6"] });
    const ids = await generations(r, "chat");
    expect(ids).toEqual(["chat", "chat~1", "chat~2"]);
    const logs = await Promise.all(ids.map((id) => r.readLog(id)));
    expect(consumed(logs)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    // D2: the predecessor's last event is the commit, naming only the three names.
    for (const [i, log] of logs.slice(0, 2).entries()) {
      expect(log.at(-1)?.kind).toBe("EXECUTION_CONTINUED");
      expect(log.at(-1)?.payload).toEqual({
        successorId: `chat~${i + 1}`,
        chainId: "chat",
        generation: i + 1,
      });
      expect(kinds(log).filter((k) => k === "EXECUTION_CONTINUED")).toHaveLength(1);
    }
    // D3: the successor's sequence 0 carries the input, its chain place and the inbox cursor.
    const s1 = logs[1]?.[0]?.payload as Record<string, unknown>;
    expect(s1).toMatchObject({
      input: { turn: 3, heard: ["M0", "M1", "M2"] },
      chainId: "chat",
      generation: 1,
      continuedFrom: { executionId: "chat", carried: { inbox: { cursors: { main: 2 } } } },
    });
    // Each generation's state holds one generation's frames, not the whole history.
    const state2 = await r.getState("chat~2");
    expect(Object.keys(state2.frames).length).toBeLessThanOrEqual(2 * 3);
    expect((await r.getState("chat")).status).toBe("continued");
    expect((await r.getState("chat"))._continuedTo).toBe("chat~1");
  });

  it("D4: resume, send and cancel addressed to any generation reach the chain's head", async () => {
    const f = flow$("turns", async (ctx, input: { n: number } | null) => {
      const n = input?.n ?? 0;
      const answer = await ctx.suspend<string>();
      if (n < 2) return ctx.continueAsNew({ n: n + 1 });
      return { n, answer, msg: await ctx.receive<string>() };
    });
    const r = chains(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "t" });
    await r.resume("t", "one");
    await until(async () => (await r.readLog("t~1")).length > 0);
    await r.resume("t", "two"); // addressed to the first id, answered by t~1
    await until(async () => (await r.readLog("t~2")).length > 0);
    await r.resume("t~1", "three");
    await r.send("t", "hello");
    const end = await r.waitForCompletion(await r.followToHead("t"));
    expect(end.output).toEqual({ n: 2, answer: "three", msg: "hello" });

    const g = flow$("idle-chain", async (ctx, input: { n: number } | null) => {
      if ((input?.n ?? 0) < 1) return ctx.continueAsNew({ n: 1 });
      return ctx.receive();
    });
    r.registerFlow(g);
    await r.start(g, null, { id: "c" });
    await until(async () => (await r.getState("c~1").catch(() => null))?.status === "parked");
    expect(await r.cancel("c", "done")).toBe(true);
    expect((await r.getState("c~1")).status).toBe("cancelled");
    expect((await r.getState("c")).status).toBe("continued");
  });

  it("D1, D8 (3): refusals (a carry over maxCarryBytes, a call inside an open scope, the flag off) come before anything is appended, and the flow may carry on", async () => {
    const big = "x".repeat(2000);
    const f = flow$("refusals", async (ctx) => {
      const seen: string[] = [];
      const note = (e: unknown) => seen.push(isLoomError(e) ? e.code : "other");
      await ctx.continueAsNew({ big }).catch(note);
      await ctx
        .parallel([async (b) => b.continueAsNew(null), async () => "other branch"])
        .catch(note);
      return seen;
    });
    const r = chains(memoryStore(), { maxCarryBytes: 1000 }).registerFlow(f);
    const out = await (await r.start(f, null, { id: "ref-1" })).result();
    expect(out.output).toEqual(["LOOM_PAYLOAD_TOO_LARGE", "LOOM_CONTINUE_AS_NEW_SCOPE_OPEN"]);
    expect(kinds(await r.readLog("ref-1"))).not.toContain("EXECUTION_CONTINUED");
    expect(await r.readLog("ref-1~1")).toEqual([]);

    // D8: the syscall is unavailable unless the fleet flag is on.
    const off = flow$("flag-off", async (ctx) =>
      ctx
        .continueAsNew(null)
        .catch((e: unknown) => e instanceof ContinueAsNewUnavailableError && e.message),
    );
    const plain = rt(memoryStore()).registerFlow(off);
    const refused = (await (await plain.start(off, null, { id: "off-1" })).result()).output;
    // The refusal says how to turn it on, in code and for the loom command (issue 21).
    expect(refused).toMatch(/features: \{ continueAsNew: true \}/);
    expect(refused).toMatch(/LOOM_FEATURES=continueAsNew/);
  });

  it("D2 (a), D8 (3), fix round 1 (3): a caller cannot create foo~1, foo~1::x, a::b~1 or parent::g#0~1, reading nothing; a~b and a::b~x stay legal", async () => {
    const f = flow$("noop", async () => 1);
    const inner = memoryStore();
    const reads: string[] = [];
    const store: Store = {
      ...inner,
      read: (id, from, limit) => (reads.push(id), inner.read(id, from, limit)),
      head: (id) => (reads.push(id), inner.head(id)),
    };
    const r = chains(store, { background: false }).registerFlow(f);
    for (const id of ["foo~1", "a::b~1", "parent::g#0~1", "foo~1::x"]) {
      await expect(r.start(f, null, { id }), id).rejects.toMatchObject({
        code: "LOOM_RESERVED_SUCCESSOR_ID",
      });
      // Refused on the id's shape alone: no read of it or of a parent (no existence oracle).
      expect(reads, id).toEqual([]);
      expect(await inner.head(id)).toBe(-1);
    }
    for (const id of ["a~b", "a~1x", "a::b~x", "plain"]) {
      expect((await (await r.start(f, null, { id })).result()).status, id).toBe("completed");
    }
  });

  it("D2 (b), D8 (3), K3: a squatted successor id fails the predecessor with ContinuationConflictError", async () => {
    const store = memoryStore();
    const f = conversation(1);
    const r = chains(store).registerFlow(f);
    // Written straight to the store, as only a broken or hostile writer could.
    const lease = await store.acquireLease("sq~1", "squatter", { ttlMs: 1000, nowMs: Date.now() });
    await store.appendMany([
      {
        executionId: "sq~1",
        events: [
          {
            executionId: "sq~1",
            seq: 0,
            kind: "EXECUTION_STARTED",
            at: Date.now(),
            payload: { flow: "other", flowVersion: "1", fingerprint: "x", schemaVersion: "1.5.0" },
          },
        ],
        expectedSeq: 0,
        fence: lease?.fence ?? 0,
        status: "pending",
        flow: "other",
      },
    ]);
    const h = await r.start(f, null, { id: "sq" });
    await r.send("sq", "hi");
    const out = await h.result();
    expect(out.status).toBe("failed");
    expect(out.error?.code).toBe("LOOM_CONTINUATION_CONFLICT");
    // Routing never follows the squatter (K5): it does not name "sq" as its predecessor.
    expect(await r.followToHead("sq")).toBe("sq");
  });

  it("D3: resources are carried, so a rotation cannot reset a quota", async () => {
    const spend = step$("spend", async (tokens: number, ectx) => {
      ectx.meter({ tokens: { output: tokens } });
      return tokens;
    });
    const f = flow$(
      "spender",
      async (ctx, input: { gen: number } | null) => {
        const gen = input?.gen ?? 0;
        const spent = await ctx
          .execute(spend, 60, { retry: false })
          .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
        if (gen === 0) return ctx.continueAsNew({ gen: 1 });
        return spent;
      },
      { budget: { tokens: 100 } },
    );
    const r = chains(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "sp" });
    const end = await r.waitForCompletion(await waitForGeneration(r, "sp", 1));
    // 60 carried + 60 would pass 100: the second spend is refused by the carried total.
    expect((await r.getState("sp~1"))._resources?.tokens).toEqual({ output: 120 });
    expect(end.output).toBe(60);
    const g = flow$(
      "spender2",
      async (ctx, input: { gen: number } | null) => {
        const gen = input?.gen ?? 0;
        const spent = await ctx
          .execute(spend, 60, { retry: false })
          .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
        if (gen < 2) return ctx.continueAsNew({ gen: gen + 1 });
        return spent;
      },
      { budget: { tokens: 100 } },
    );
    r.registerFlow(g);
    await r.start(g, null, { id: "sp2" });
    const last = await r.waitForCompletion(await waitForGeneration(r, "sp2", 2));
    expect(last.output).toBe("LOOM_QUOTA_EXCEEDED");
  });

  it("D3, D8 (5): the chain deadline is fixed at generation 0 and survives a rotation", async () => {
    const f = flow$(
      "deadline-chain",
      async (ctx, input: { gen: number } | null) => {
        if ((input?.gen ?? 0) === 0) return ctx.continueAsNew({ gen: 1 });
        // A running step: a parked generation is cancelled only when next woken (residual 3).
        await ctx.run(
          "long",
          ({ signal }) =>
            new Promise((resolve, reject) => {
              const t = setTimeout(resolve, 60_000);
              signal.addEventListener("abort", () => {
                clearTimeout(t);
                reject(new Error("aborted", { cause: signal.reason }));
              });
            }),
        );
        return "slept";
      },
      { deadlineMs: 400 },
    );
    const r = chains(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "dl" });
    await h.result();
    const s0 = await r.getState("dl");
    const s1 = await r.getState(await waitForGeneration(r, "dl", 1));
    // Its own deadline is what is left of the chain's, not a fresh 400 ms.
    expect(s1.startedAt + (s1.deadlineMs ?? Infinity)).toBe(s0.startedAt + 400);
    const end = await r.waitForCompletion("dl~1");
    expect(end.status).toBe("cancelled");
    expect(end.error?.code).toBe("LOOM_DEADLINE_EXCEEDED");
  });

  it("D8 (5), D4, ADR 0110 D6: the dedupe window survives a rotation (a duplicate send after it is skipped)", async () => {
    const f = flow$("dedupe-chain", async (ctx, input: { gen: number } | null) => {
      const msg = await ctx.receive<string>();
      if ((input?.gen ?? 0) === 0) return ctx.continueAsNew({ gen: 1 });
      return msg;
    });
    const r = chains(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "dw" });
    await r.send("dw", "first", { key: "k" });
    await waitForGeneration(r, "dw", 1);
    await r.send("dw", "first, retried", { key: "k" });
    await r.send("dw", "second", { key: "k2" });
    expect((await r.waitForCompletion("dw~1")).output).toBe("second");
  });

  it("resumes sent back to back across rotations are each answered once (none lost in the window)", async () => {
    const f = flow$("resumed", async (ctx, input: { turn: number; got: string[] } | null) => {
      let turn = input?.turn ?? 0;
      const got = input?.got ?? [];
      for (;;) {
        got.push(await ctx.suspend<string>());
        turn++;
        if (turn === 6) return got;
        if (turn % 2 === 0) return ctx.continueAsNew({ turn, got });
      }
    });
    const r = chains(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "rs" });
    for (let i = 0; i < 6; i++) await r.resume("rs", `r${i}`);
    const end = await r.waitForCompletion(await waitForGeneration(r, "rs", 2));
    expect(end.output).toEqual(["r0", "r1", "r2", "r3", "r4", "r5"]);
  });

  it("a continued execution's outcome names its successor; replay of every generation is equal", async () => {
    const f = conversation(2, 4);
    // Snapshots every few events: snapshot plus tail must equal the whole fold (F5), also for
    // a successor whose carried inbox the fold goes on changing.
    const r = chains(memoryStore(), { snapshotEvery: 2 }).registerFlow(f);
    await r.start(f, null, { id: "eq" });
    for (let i = 0; i < 4; i++) await r.send("eq", `m${i}`);
    const end = await r.waitForCompletion(await waitForGeneration(r, "eq", 1));
    expect(end.status).toBe("completed");
    expect(await r.waitForCompletion("eq")).toEqual({ status: "continued", continuedTo: "eq~1" });
    for (const id of ["eq", "eq~1"]) {
      const log = await r.readLog(id);
      const loaded = await loadState(r.store, id);
      expect(canonicalJson(loaded), id).toBe(canonicalJson(foldAll(log)));
      const carried = log[0]?.payload as { continuedFrom?: { carried: unknown } };
      if (id === "eq~1") {
        expect(loaded?._chain?.continuedFrom?.carried).toEqual(carried.continuedFrom?.carried);
      }
    }
  });
});

/** Waits until generation `n` of `chainId` exists, and returns its id. */
describe("the start-to-commit window (ADR 0109 D2, D4, fix round 1)", () => {
  const idle = flow$("idle-chain", async (ctx, input: { gen: number } | null) => {
    const gen = input?.gen ?? 0;
    if (gen === 0) return ctx.continueAsNew({ gen: 1 });
    return ctx.receive<string>();
  });

  it("D8 (3): a send in the start-to-commit window resolves to the successor and is delivered once", async () => {
    const data = memoryStore();
    const g = gated(data, "EXECUTION_CONTINUED");
    const r = chains(data.reopen(), { store: g.store }).registerFlow(idle);
    await r.start(idle, null, { id: "w" });
    await g.isHeld;
    expect((await r.getState("w")).status).not.toBe("continued");
    expect(await r.followToHead("w")).toBe("w~1"); // the probe
    // The send routes in the window; it cannot finish before the commit (the journal holds
    // the successor's appends behind the held one), so it is released once the message is in.
    const sending = r.send("w", "in the window");
    await until(async () => (await r.store.readMessages("w", "main", -1, 1)).length === 1);
    g.release(true);
    expect(await sending).toEqual({ chainId: "w", seq: 0 });
    expect((await r.waitForCompletion("w~1")).output).toBe("in the window");
    const logs = [await r.readLog("w"), await r.readLog("w~1")];
    expect(consumed(logs)).toEqual([0]);
  });

  it("D8 (3), K4 (i): a cancel in the window cancels the started successor too: no live generation", async () => {
    const data = memoryStore();
    const g = gated(data, "EXECUTION_CONTINUED");
    const r = chains(data.reopen(), { store: g.store }).registerFlow(idle);
    await r.start(idle, null, { id: "k" });
    await g.isHeld;
    const cancelling = r.cancel("k", "stop the chain");
    g.release(true);
    await cancelling;
    const ends = await Promise.all(["k", "k~1"].map(async (id) => (await r.getState(id)).status));
    expect(ends.every((s) => s === "cancelled" || s === "continued")).toBe(true);
    expect(ends[1]).toBe("cancelled");
    expect(await r.readLog("k~2")).toEqual([]);
  });

  it("D8 (1), K1: a crash in the window is repaired by recovery: one successor, adopted, and one commit", async () => {
    const data = memoryStore();
    const g = gated(data, "EXECUTION_CONTINUED");
    const a = chains(data.reopen(), { store: g.store, leaseTtlMs: 100, background: false });
    a.registerFlow(idle);
    await a.start(idle, null, { id: "rc" });
    await g.isHeld;
    const successorStart = (await a.readLog("rc~1"))[0];
    g.release(false);
    await until(async () => (await a.readLog("rc")).at(-1)?.kind !== "EXECUTION_CONTINUED");
    await a.close();
    await new Promise((r) => setTimeout(r, 150)); // the dead owner's leases expire
    const b = chains(data.reopen(), { leaseTtlMs: 100 }).registerFlow(idle);
    await b.recoverAbandoned();
    await until(async () => (await b.readLog("rc")).at(-1)?.kind === "EXECUTION_CONTINUED");
    const log = await b.readLog("rc");
    expect(log.filter((e) => e.kind === "EXECUTION_CONTINUED")).toHaveLength(1);
    expect((await b.readLog("rc~1"))[0]).toEqual(successorStart); // adopted, not rewritten
    expect(await b.readLog("rc~2")).toEqual([]);
    await b.send("rc", "after the repair");
    expect((await b.waitForCompletion("rc~1")).output).toBe("after the repair");
    // A continued predecessor is terminal: a further recovery runs nothing (a no-op).
    expect(await b.recoverAbandoned()).toEqual([]);
    expect(await b.readLog("rc")).toEqual(log);
  });

  it("D8 (3), K4 (ii): a successor whose predecessor was cancelled after the probe cancels itself", async () => {
    const data = memoryStore();
    const g = gated(data, "EXECUTION_CONTINUED");
    const a = chains(data.reopen(), { store: g.store, leaseTtlMs: 100, background: false });
    a.registerFlow(idle);
    await a.start(idle, null, { id: "pc" });
    await g.isHeld;
    g.release(false);
    await a.close();
    await new Promise((r) => setTimeout(r, 150));
    // A canceller that does not route (the flag off: no probe) ends only the predecessor.
    const plain = rt(data.reopen(), { background: false, leaseTtlMs: 100 });
    expect(await plain.cancel("pc", "operator")).toBe(true);
    const b = chains(data.reopen(), { leaseTtlMs: 100 }).registerFlow(idle);
    await b.recoverAbandoned();
    await until(async () => (await b.getState("pc~1")).status === "cancelled");
    const last = (await b.readLog("pc~1")).at(-1);
    expect(last?.kind).toBe("EXECUTION_CANCELLED");
    expect((last?.payload as { reason: unknown }).reason).toEqual({
      kind: "cascade",
      parent: "pc",
    });
  });
});

describe("routing follows verified links only (ADR 0109 K5, K6, fix rounds 1 and 3)", () => {
  /** Writes a log straight to the store, as only a broken or hostile writer could. */
  const hops = (n: number) =>
    flow$("hops", async (ctx, input: { gen: number } | null) => {
      const gen = input?.gen ?? 0;
      if (gen < n) return ctx.continueAsNew({ gen: gen + 1 });
      return ctx.receive<string>();
    });
  const base = { flow: "hops", flowVersion: "1", fingerprint: "x", schemaVersion: "1.5.0" };

  it("fix round 1 (2), K5: a squatter that does not name its predecessor is never routed to", async () => {
    const store = memoryStore();
    const f = hops(1);
    const r = chains(store).registerFlow(f);
    await r.start(f, null, { id: "v" });
    await waitForGeneration(r, "v", 1);
    await forge(store, "v~2", {
      ...base,
      chainId: "v",
      generation: 2,
      continuedFrom: { executionId: "someone-else", carried: {} },
    });
    expect(await r.followToHead("v")).toBe("v~1");
    await r.send("v", "to the real head");
    expect((await r.waitForCompletion("v~1")).output).toBe("to the real head");
  });

  it("fix round 3 (3), residual (1), K6: a chain routes in O(log n) reads; past maxChainHops of unverified ground it is ChainHopLimitError", async () => {
    const store = memoryStore();
    const f = hops(11);
    const r = chains(store, { maxChainHops: 8 }).registerFlow(f);
    await r.start(f, null, { id: "long" });
    await waitForGeneration(r, "long", 11);
    expect(await r.followToHead("long")).toBe("long~11");
    expect(await r.followToHead("long~4")).toBe("long~11");
    // A forged deepest generation fails verification; the fallback walk from the first id
    // would need 11 verified steps, more than 8: refused, naming the furthest verified id.
    await forge(store, "long~12", {
      ...base,
      chainId: "long",
      generation: 12,
      continuedFrom: { executionId: "long~11", carried: {} },
      principal: "mallory",
    });
    // (A runtime that has not routed this chain yet: one that has remembers the head it found.)
    const fresh = chains(store, { maxChainHops: 8, background: false });
    await expect(fresh.followToHead("long")).rejects.toMatchObject({
      code: "LOOM_CHAIN_HOP_LIMIT",
      details: { furthest: "long~8" },
    });
    // From a later id the remaining walk is short: it lands on the verified head.
    expect(await fresh.followToHead("long~6")).toBe("long~11");
    expect(await r.followToHead("long")).toBe("long~11");
  });

  it("D8 (6): the ExecutionStatus union is pinned, continued included and terminal", () => {
    // Issue 26 added `queued` (schema 1.12.0), which is not terminal.
    expect(EXECUTION_STATUSES).toEqual([
      "queued",
      "pending",
      "running",
      "parked",
      "completed",
      "failed",
      "cancelled",
      "continued",
    ]);
    expect(isTerminalStatus("continued")).toBe(true);
    expect(isTerminalStatus("queued")).toBe(false);
  });
});

describe("fixes from the adversarial review of chains", () => {
  const idle = flow$("idle-chain-2", async (ctx, input: { gen: number } | null) => {
    if ((input?.gen ?? 0) === 0) return ctx.continueAsNew({ gen: 1 });
    return ctx.receive<string>();
  });

  it("K4: a cancel from another process during the rotation leaves no live successor", async () => {
    const data = memoryStore();
    const g = gated(data, "EXECUTION_STARTED");
    // Only the successor's start is held: the first start is let through at once.
    let first = true;
    const store = new Proxy(g.store, {
      get(target, key, receiver) {
        if (key !== "appendMany") return Reflect.get(target, key, receiver) as unknown;
        return (batches: AppendBatch[]) =>
          first && batches.some((b) => b.executionId === "kc")
            ? ((first = false), data.appendMany(batches))
            : target.appendMany(batches);
      },
    });
    const a = chains(data.reopen(), { store }).registerFlow(idle);
    await a.start(idle, null, { id: "kc" });
    await g.isHeld;
    const b = chains(data.reopen(), { background: false });
    expect(await b.cancel("kc", "from elsewhere")).toBe(true);
    g.release(true);
    await until(async () => {
      const s = await loadState(data, "kc~1");
      return s === undefined || s.status === "cancelled";
    });
    const successor = await loadState(data, "kc~1");
    expect(successor === undefined || successor.status === "cancelled").toBe(true);
    expect((await loadState(data, "kc"))?.status).toBe("cancelled");
  });

  it("D4, fix round 1 (4): a resume the predecessor takes in the window reaches the successor (routed with the probe)", async () => {
    const data = memoryStore();
    const g = gated(data, "EXECUTION_CONTINUED");
    const f = flow$("rz-flow", async (ctx, input: { gen: number } | null) => {
      if ((input?.gen ?? 0) === 0) return ctx.continueAsNew({ gen: 1 });
      return ctx.suspend<string>();
    });
    const a = chains(data.reopen(), { store: g.store, leaseTtlMs: 100, background: false });
    a.registerFlow(f);
    await a.start(f, null, { id: "rz" });
    await g.isHeld;
    g.release(false); // the commit fails: the predecessor stays running
    const b = chains(data.reopen(), { background: false }).registerFlow(f);
    await b.resume("rz", "hello");
    const log = await data.read("rz");
    expect(log.map((e) => e.kind)).not.toContain("RESUMED");
    await a.close();
    await new Promise((r) => setTimeout(r, 150));
    const c = chains(data.reopen(), { leaseTtlMs: 100 }).registerFlow(f);
    await c.recoverAbandoned();
    expect((await c.waitForCompletion("rz~1")).output).toBe("hello");
  });

  it("D1, fix round 1 (5): a step a returned branch left running is awaited, not refused, and its cost is carried", async () => {
    const spend = step$("spend-late", async (n: number, ectx) => {
      await new Promise((r) => setTimeout(r, 50));
      ectx.meter({ tokens: { output: n } });
      return n;
    });
    const f = flow$("dangling", async (ctx, input: { gen: number } | null) => {
      if ((input?.gen ?? 0) === 1) return ctx.run("done", () => "ok");
      await ctx.parallel([
        async (b) => {
          void b.execute(spend, 10).catch(() => undefined);
          return null;
        },
      ]);
      return ctx.continueAsNew({ gen: 1 });
    });
    const r = chains(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "dg" });
    expect((await r.waitForCompletion(await waitForGeneration(r, "dg", 1))).output).toBe("ok");
    const log = await r.readLog("dg");
    const kinds = log.map((e) => e.kind);
    expect(kinds.indexOf("STEP_COMPLETED")).toBeLessThan(kinds.indexOf("EXECUTION_CONTINUED"));
    expect((await r.getState("dg~1"))._resources?.tokens).toEqual({ output: 10 });
  });

  it("residual (0), fix round 3 (3): a gap in the chain is a clean refusal for send and cancel, with nothing appended", async () => {
    const store = memoryStore();
    const f = flow$("gappy", async (ctx, input: { gen: number } | null) => {
      const gen = input?.gen ?? 0;
      if (gen < 3) return ctx.continueAsNew({ gen: gen + 1 });
      return ctx.receive<string>();
    });
    const r = chains(store).registerFlow(f);
    await r.start(f, null, { id: "gp" });
    await waitForGeneration(r, "gp", 3);
    // Parked on its receive before the refusals (a loaded machine may not have got it there yet).
    await until(async () => (await r.getState("gp~3")).status === "parked");
    // A store that lost generation 2 (as a retention gap would):
    const holed = new Proxy(store, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (key !== "read" && key !== "head") return v;
        return (id: string, ...rest: unknown[]) =>
          id === "gp~2"
            ? Promise.resolve(key === "head" ? -1 : [])
            : (v as (...a: unknown[]) => unknown).apply(target, [id, ...rest]);
      },
    });
    // Not through the suite's runtimes: its after-test check would read the holed store.
    const other = createRuntime({
      store: holed,
      closeStore: false,
      background: false,
      features: { continueAsNew: true },
    });
    try {
      await expect(other.send("gp", "lost?")).rejects.toMatchObject({
        code: "LOOM_CHAIN_HOP_LIMIT",
      });
      expect(await store.readMessages("gp", "main", -1, 10)).toEqual([]);
      await expect(other.cancel("gp", "stop")).rejects.toMatchObject({
        code: "LOOM_CHAIN_HOP_LIMIT",
      });
    } finally {
      await other.close();
    }
    expect((await r.getState("gp~3")).status).toBe("parked");
  });

  it("ADR 0111: the owner resumes a continued id; other callers cannot wait on or probe an owned execution", async () => {
    const f = flow$("owned-chain", async (ctx, input: { gen: number } | null) => {
      if ((input?.gen ?? 0) === 0) return ctx.continueAsNew({ gen: 1 });
      return { secret: await ctx.suspend<string>() };
    });
    const r = chains(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "ow", principal: "alice" });
    expect(await h.result()).toEqual({ status: "continued", continuedTo: "ow~1" });
    await until(async () => (await r.store.read("ow~1", 0, 1)).length > 0);
    await r.resume("ow", "42", { as: "alice" });
    expect((await r.waitForCompletion("ow~1", { as: "alice" })).output).toEqual({ secret: "42" });
    await expect(r.waitForCompletion("ow~1")).rejects.toMatchObject({ code: "LOOM_UNAUTHORIZED" });
    // Another principal's start of the same id learns nothing of its flow or input.
    await expect(
      r.start("owned-chain", { guess: 1 }, { id: "ow", principal: "mallory" }),
    ).rejects.toMatchObject({ code: "LOOM_UNAUTHORIZED" });
  });

  it("D3: a named nested budget is carried too, so a rotation cannot reset it", async () => {
    const spend = step$("spend-scoped", async (n: number, ectx) => {
      ectx.meter({ tokens: { output: n } });
      return n;
    });
    const f = flow$("scoped-chain", async (ctx, input: { gen: number } | null) => {
      const gen = input?.gen ?? 0;
      const got = await ctx
        .nestedBudget("tools", { tokens: 10 }, (c) => c.execute(spend, 10, { retry: false }))
        .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
      if (gen === 0) return ctx.continueAsNew({ gen: 1 });
      return got;
    });
    const r = chains(memoryStore()).registerFlow(f);
    await r.start(f, null, { id: "nb" });
    expect((await r.waitForCompletion(await waitForGeneration(r, "nb", 1))).output).toBe(
      "LOOM_QUOTA_EXCEEDED",
    );
  });

  it("K1: a generation re-driven after a crash in its window commits at once, even past its deadline", async () => {
    const data = memoryStore();
    const g = gated(data, "EXECUTION_CONTINUED");
    const f = flow$(
      "late-commit",
      async (ctx, input: { gen: number } | null) => {
        if ((input?.gen ?? 0) === 0) return ctx.continueAsNew({ gen: 1 });
        return "successor ran";
      },
      { deadlineMs: 100 },
    );
    const a = chains(data.reopen(), { store: g.store, leaseTtlMs: 50, background: false });
    a.registerFlow(f);
    await a.start(f, null, { id: "lc" });
    await g.isHeld;
    g.release(false);
    await a.close();
    await new Promise((r) => setTimeout(r, 200)); // past the deadline, and the lease
    const b = chains(data.reopen(), { leaseTtlMs: 50 }).registerFlow(f);
    await b.recoverAbandoned();
    await until(async () => isTerminalStatus((await b.getState("lc")).status));
    // Continued, not cancelled by its deadline: no cancelled generation before a live one.
    expect((await b.getState("lc")).status).toBe("continued");
    expect(await b.followToHead("lc")).toBe("lc~1");
  });

  it("a chain id too long for its successor's id is refused before anything is recorded", async () => {
    const f = flow$("long-id", async (ctx) =>
      ctx.continueAsNew(null).catch((e: unknown) => (isLoomError(e) ? e.code : "other")),
    );
    const r = chains(memoryStore()).registerFlow(f);
    const id = "x".repeat(199);
    expect((await (await r.start(f, null, { id })).result()).output).toBe("LOOM_INVALID_INPUT");
    expect((await r.readLog(id)).map((e) => e.kind)).not.toContain("EXECUTION_CONTINUED");
  });
});
