/**
 * Children and the supervisor (issue 8; ADR 0109 D5, D6 and D8 (3), (4)): runtime/children.ts
 * O1..O7, fold/children.ts F8..F10, fold/index-changes.ts W1, W2.
 */
import { spawn } from "./support/processes.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  childTree,
  createRuntime,
  flow$,
  isLoomError,
  memoryStore,
  step$,
  type ChildHandle,
  type ExecutionState,
  type Runtime,
  type RuntimeOptions,
  type Store,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const sup = (store: Store, extra: Partial<RuntimeOptions> = {}) =>
  rt(store, { features: { continueAsNew: true }, ...extra });

/** A child that doubles its input. */
const double = flow$("double", async (ctx, n: number) => ctx.run("double", () => n * 2));

/** A child that waits for a message, forever unless one comes. */
const waiter = flow$("waiter", async (ctx) => ctx.receive<string>());

async function statusOf(r: Runtime, id: string): Promise<string> {
  return (await r.getState(id)).status;
}

async function logged(r: Runtime, id: string) {
  await until(async () => (await r.readLog(id)).length > 0);
}

describe("spawn and awaitChild (O1, O2, F8, F9)", () => {
  it("O1: children get ids <parent>::<key>#<i>, run, and settle their slots with their outputs", async () => {
    const parent = flow$("parent", async (ctx) => {
      const a = await ctx.spawn(double, 1);
      const b = await ctx.spawn(double, 2);
      const c = await ctx.spawn("double", 3, { key: "third" });
      return [
        a.id,
        b.id,
        c.id,
        await ctx.awaitChild(a),
        await ctx.awaitChild(b),
        await ctx.awaitChild(c),
      ];
    });
    const r = sup(memoryStore()).registerFlow(double).registerFlow(parent);
    const h = await r.start(parent, null, { id: "p1" });
    expect((await h.result()).output).toEqual([
      "p1::double#0",
      "p1::double#1",
      "p1::third#0",
      2,
      4,
      6,
    ]);
    const log = await r.readLog("p1");
    const kinds = log.map((e) => e.kind);
    expect(kinds.filter((k) => k === "CHILD_STARTED")).toHaveLength(3);
    expect(kinds.filter((k) => k === "CHILD_DONE")).toHaveLength(3);
    // O1: the spawn is in the parent's log before the child's sequence 0.
    const child = await r.readLog("p1::double#0");
    const spawnedAt = log.find((e) => e.kind === "CHILD_STARTED")?.at ?? Infinity;
    expect(child[0]?.at).toBeGreaterThanOrEqual(spawnedAt);
    expect((await r.getState("p1::double#0"))._parent).toEqual({
      executionId: "p1",
      chainId: "p1",
      callId: "double#0",
      detached: false,
    });
  });

  it("a failed child throws ChildFailedError from awaitChild, naming the child", async () => {
    const failing = flow$("failing", async () => {
      throw new Error("no luck");
    });
    const parent = flow$("parent-f", async (ctx) => {
      const c = await ctx.spawn(failing, null);
      return ctx
        .awaitChild(c)
        .catch((e: unknown) => (isLoomError(e) ? [e.code, e.message] : "other"));
    });
    const r = sup(memoryStore()).registerFlow(failing).registerFlow(parent);
    const out = (await (await r.start(parent, null, { id: "pf" })).result()).output;
    expect(out).toEqual(["LOOM_CHILD_FAILED", 'child "pf::failing#0" failed: no luck']);
  });

  it("O7: awaiting an execution that is not a child of this chain is refused before anything is recorded", async () => {
    const parent = flow$("nosy", async (ctx) =>
      ctx.awaitChild("stranger").catch((e: unknown) => (isLoomError(e) ? e.code : "other")),
    );
    const r = sup(memoryStore()).registerFlow(double).registerFlow(parent);
    await r.start(double, 5, { id: "stranger" });
    const h = await r.start(parent, null, { id: "nosy-1" });
    expect((await h.result()).output).toBe("LOOM_INVALID_INPUT");
    expect((await r.readLog("nosy-1")).map((e) => e.kind)).not.toContain("SUSPENDED");
  });

  it("O2: a child that ends while its parent's process is gone settles the slot from the log alone", async () => {
    const store = memoryStore();
    const gate = { open: false };
    const slow = flow$("slow", async (ctx) => {
      await ctx.run("wait", async () => {
        await until(() => gate.open, 10_000);
        return "late";
      });
      return "slow done";
    });
    const parent = flow$("parent-o2", async (ctx) => ctx.awaitChild(await ctx.spawn(slow, null)));
    const first = sup(store).registerFlow(slow).registerFlow(parent);
    await first.start(parent, null, { id: "o2" });
    await until(async () => (await statusOf(first, "o2")) === "parked");
    // A second process takes the child over (its lease expires with the first's close).
    await first.close();
    gate.open = true;
    // Its background loop recovers the child; the child's end wakes the parent (W1).
    const second = sup(store).registerFlow(slow).registerFlow(parent);
    await until(async () => (await statusOf(second, "o2")) === "completed", 10_000);
    expect((await second.waitForCompletion("o2")).output).toBe("slow done");
  });
});

describe("D5: children at the parent's end (O4, W2; D8 (4))", () => {
  it("D5, D8 (4): an attached child is cancelled with the cascade reason when its parent is cancelled", async () => {
    const parent = flow$("parent-c", async (ctx) => ctx.awaitChild(await ctx.spawn(waiter, null)));
    const r = sup(memoryStore()).registerFlow(waiter).registerFlow(parent);
    await r.start(parent, null, { id: "pc" });
    await logged(r, "pc::waiter#0");
    await until(async () => (await statusOf(r, "pc::waiter#0")) === "parked");
    await r.cancel("pc", "user closed the tab");
    await until(async () => (await statusOf(r, "pc::waiter#0")) === "cancelled");
    const log = await r.readLog("pc::waiter#0");
    expect(log[log.length - 1]?.payload).toMatchObject({
      reason: { kind: "cascade", parent: "pc" },
    });
  });

  it("D5, D8 (4): when the parent continues, an attached child is cancelled and a detached one survives, awaitable by the successor from the carry", async () => {
    const parent = flow$("parent-r", async (ctx, input: { detached: ChildHandle } | null) => {
      if (input !== null) return ctx.awaitChild<string>(input.detached);
      await ctx.spawn(waiter, null, { key: "attached" });
      const detached = await ctx.spawn(waiter, null, { key: "kept", detached: true });
      return ctx.continueAsNew({ detached });
    });
    const r = sup(memoryStore()).registerFlow(waiter).registerFlow(parent);
    await r.start(parent, null, { id: "pr" });
    await logged(r, "pr~1");
    await until(async () => (await statusOf(r, "pr::attached#0")) === "cancelled");
    const attached = await r.readLog("pr::attached#0");
    expect(attached[attached.length - 1]?.payload).toMatchObject({
      reason: { kind: "cascade", parent: "pr" },
    });
    expect(await statusOf(r, "pr::kept#0")).not.toBe("cancelled");
    await until(async () => (await statusOf(r, "pr~1")) === "parked");
    await r.send("pr::kept#0", "still here");
    expect((await r.waitForCompletion("pr~1")).output).toBe("still here");
  });

  it("D8 (3): a continued parent's children (chain~1::g#0) start and are awaited; a caller still cannot start chain~1::x", async () => {
    const parent = flow$("gen-parent", async (ctx, input: { gen: number } | null) => {
      if (input === null) return ctx.continueAsNew({ gen: 1 });
      return ctx.awaitChild(await ctx.spawn(double, 21, { key: "g" }));
    });
    const r = sup(memoryStore()).registerFlow(double).registerFlow(parent);
    await r.start(parent, null, { id: "chain" });
    await logged(r, "chain~1");
    expect((await r.waitForCompletion("chain~1")).output).toBe(42);
    expect((await r.getState("chain~1::g#0")).status).toBe("completed");
    await expect(r.start(double, 1, { id: "chain~1::x" })).rejects.toMatchObject({
      code: "LOOM_RESERVED_SUCCESSOR_ID",
    });
  });
});

describe("D6: a continued child settles its parent's original slot (O3, W1)", () => {
  it("D6: a child that rotates 10 times and then completes settles its parent's original slot", async () => {
    const rotating = flow$("rotating", async (ctx, input: { gen: number } | null) => {
      const gen = input?.gen ?? 0;
      await ctx.run("turn", () => gen);
      if (gen < 10) return ctx.continueAsNew({ gen: gen + 1 });
      return `done after ${gen} rotations`;
    });
    const parent = flow$("parent-d6", async (ctx) =>
      ctx.awaitChild(await ctx.spawn(rotating, null)),
    );
    const r = sup(memoryStore()).registerFlow(rotating).registerFlow(parent);
    const h = await r.start(parent, null, { id: "d6" });
    expect((await h.result()).output).toBe("done after 10 rotations");
    expect(await r.followToHead("d6::rotating#0")).toBe("d6::rotating#0~10");
    const done = (await r.readLog("d6")).filter((e) => e.kind === "CHILD_DONE");
    expect(done.map((e) => (e.payload as { childId: string }).childId)).toEqual(["d6::rotating#0"]);
  });
});

describe("deadlines and budgets cascade (O5, O6, F10)", () => {
  it("O5: a child's deadline is at most its parent's remaining deadline", async () => {
    const long = flow$("long", async (ctx) => ctx.receive<string>(), { deadlineMs: 3_600_000 });
    const parent = flow$("parent-dl", async (ctx) => (await ctx.spawn(long, null)).id, {
      deadlineMs: 60_000,
    });
    const r = sup(memoryStore()).registerFlow(long).registerFlow(parent);
    const h = await r.start(parent, null, { id: "dl" });
    const childId = (await h.result()).output as string;
    const [parentState, childState] = [await r.getState("dl"), await r.getState(childId)];
    const parentEnd = parentState.startedAt + (parentState.deadlineMs ?? Infinity);
    expect(childState.startedAt + (childState.deadlineMs ?? Infinity)).toBeLessThanOrEqual(
      parentEnd,
    );
    await r.cancel(childId);
  });

  it("O6, F10: a parent with a 1,000-token budget whose children each try to spend 600 spends at most 1,000 plus one metered delta", async () => {
    const spend = step$("spend", async (_: null, ectx) => {
      ectx.meter({ tokens: { input: 300, output: 300 } });
      return "spent";
    });
    const child = flow$("spender", async (ctx) => ctx.execute(spend, null));
    const parent = flow$(
      "budgeted",
      async (ctx) => {
        const results: string[] = [];
        for (let i = 0; i < 3; i++) {
          const c = await ctx.spawn(child, null);
          results.push(
            await ctx
              .awaitChild<string>(c)
              .catch((e: unknown) => (isLoomError(e) ? e.code : "other")),
          );
        }
        return results;
      },
      { budget: { tokens: 1000 } },
    );
    const r = sup(memoryStore()).registerFlow(child).registerFlow(parent);
    const out = (await (await r.start(parent, null, { id: "bud" })).result()).output;
    expect(out).toEqual(["spent", "spent", "LOOM_CHILD_FAILED"]);
    let total = 0;
    for (let i = 0; i < 3; i++) {
      const s = await r.getState(`bud::spender#${i}`);
      total += (s._resources?.tokens?.input ?? 0) + (s._resources?.tokens?.output ?? 0);
    }
    expect(total).toBeLessThanOrEqual(1000 + 600);
    expect(total).toBe(1200);
    const parentState = await r.getState("bud");
    expect(
      (parentState._resources?.tokens?.input ?? 0) + (parentState._resources?.tokens?.output ?? 0),
    ).toBe(1200);
  });
});

describe("analytics and loom show: the children tree (issue 8)", () => {
  it("childTree projects the tree from states, a continued child by its head; loom show renders it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-tree-show-"));
    try {
      const db = join(dir, "loom.db");
      const rotating = flow$("rot", async (ctx, gen: number) =>
        gen < 2 ? ctx.continueAsNew(gen + 1) : `gen ${gen}`,
      );
      const grand = flow$("tree-mid", async (ctx) => ctx.awaitChild(await ctx.spawn(double, 4)));
      const root = flow$("tree-root", async (ctx) => {
        const a = await ctx.spawn(grand, null, { key: "mid" });
        const b = await ctx.spawn(rotating, 0, { key: "rot" });
        const c = await ctx.spawn(waiter, null, { key: "bg", detached: true });
        return [await ctx.awaitChild(a), await ctx.awaitChild(b), c.id];
      });
      const r = createRuntime({ store: sqliteStore(db), features: { continueAsNew: true } });
      for (const f of [double, waiter, rotating, grand, root]) r.registerFlow(f);
      const out = await (await r.start(root, null, { id: "tree" })).result();
      expect(out.output).toEqual([8, "gen 2", "tree::bg#0"]);
      const states = new Map<string, ExecutionState>();
      for (const id of [
        "tree",
        "tree::mid#0",
        "tree::mid#0::double#0",
        "tree::rot#0",
        "tree::rot#0~1",
        "tree::rot#0~2",
        "tree::bg#0",
      ]) {
        states.set(id, await r.getState(id));
      }
      await r.close();
      expect(childTree(states, "tree")).toEqual({
        executionId: "tree",
        children: [
          {
            executionId: "tree::mid#0",
            flow: "tree-mid",
            detached: false,
            status: "completed",
            children: [
              {
                executionId: "tree::mid#0::double#0",
                flow: "double",
                detached: false,
                status: "completed",
                children: [],
              },
            ],
          },
          {
            executionId: "tree::rot#0",
            flow: "rot",
            detached: false,
            status: "completed",
            head: "tree::rot#0~2",
            children: [],
          },
          {
            executionId: "tree::bg#0",
            flow: "waiter",
            detached: true,
            status: "parked",
            children: [],
          },
        ],
      });
      const bin = fileURLToPath(new URL("../bin/loom.js", import.meta.url));
      const shown = await new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, [bin, "show", "tree", "--db", db], { cwd: dir });
        let text = "";
        child.stdout.on("data", (d: Buffer) => (text += d.toString()));
        child.on("error", reject);
        child.on("exit", (code) =>
          code === 0 ? resolve(text) : reject(new Error(`exit ${code}`)),
        );
      });
      expect(shown).toMatch(/^children \(3\)$/m);
      expect(shown).toMatch(/^ {2}tree::mid#0 {2}tree-mid {2}completed$/m);
      expect(shown).toMatch(/^ {4}tree::mid#0::double#0 {2}double {2}completed$/m);
      expect(shown).toMatch(
        /^ {2}tree::rot#0 {2}rot {2}completed \(continued; head tree::rot#0~2\)$/m,
      );
      expect(shown).toMatch(/^ {2}tree::bg#0 {2}waiter, detached {2}parked$/m);
      expect(shown).toMatch(/CHILD_STARTED/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("fixes from the adversarial review of children", () => {
  const spender = (tokens: number, steps: number) =>
    flow$(`spend-${tokens}x${steps}`, async (ctx) => {
      const spend = step$("spend", async (_: null, ectx) => {
        ectx.meter({ tokens: { input: tokens } });
        return tokens;
      });
      let total = 0;
      for (let i = 0; i < steps; i++) total += await ctx.execute(spend, null);
      return total;
    });
  const spentBy = async (r: Runtime, id: string) =>
    (await r.getState(id))._resources?.tokens?.input ?? 0;

  it("O1: a spawn onto an id another principal owns settles the slot failed; that execution is neither read nor cancelled", async () => {
    const store = memoryStore();
    const secret = flow$("secret", async (ctx) => ctx.receive<string>());
    const nosy = flow$("nosy-parent", async (ctx) => {
      const code = await ctx
        .spawn(secret, null, { key: "secret" })
        .then(() => "spawned")
        .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
      const read = await ctx
        .awaitChild("t::secret#0")
        .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
      await ctx.receive<string>();
      return [code, read];
    });
    const r = sup(store).registerFlow(secret).registerFlow(nosy);
    // Bob's execution under the id, made before child ids were reserved (a caller can no longer
    // start one: kernel/ids.ts I1): its sequence 0, written as a start wrote it then.
    await r.start(secret, null, { id: "bob-own", principal: "bob" });
    const [first] = await store.read("bob-own", 0, 1);
    if (!first) throw new Error("bob's start is missing");
    const taken = await store.appendMany([
      {
        executionId: "t::secret#0",
        events: [{ ...first, executionId: "t::secret#0", meta: { fence: 1 } }],
        expectedSeq: 0,
        fence: 1,
        status: "running",
        flow: "secret",
        claimLease: { owner: "a start from before", expiresAtMs: 0 },
      },
    ]);
    expect(taken).toEqual([{ ok: true }]);
    await r.start(nosy, null, { id: "t", principal: "eve" });
    await until(async () => (await r.getState("t", { as: "eve" })).status === "parked");
    expect((await r.getState("t", { as: "eve" }))._children?.["t::secret#0"]?.outcome?.status).toBe(
      "failed",
    );
    await r.cancel("t", "eve leaves", { as: "eve" });
    await new Promise((res) => setTimeout(res, 200));
    expect((await r.getState("t::secret#0", { as: "bob" })).status).toBe("parked");
    const log = await r.readLog("t", { as: "eve" });
    expect(log.filter((e) => e.kind === "CHILD_DONE")).toHaveLength(1);
  });

  it("O6: a detached child, a grandchild and the parent's own effects all spend from the parent's budget", async () => {
    const store = memoryStore();
    const greedy = spender(600, 3);
    const middle = flow$("middle", async (ctx) => (await ctx.spawn(greedy, null, { key: "g" })).id);
    const own = step$("own", async (_: null, ectx) => {
      ectx.meter({ tokens: { input: 100 } });
      return "own";
    });
    const parent = flow$(
      "guarded",
      async (ctx) => {
        const detached = await ctx.spawn(greedy, null, { key: "away", detached: true });
        const code = await ctx
          .awaitChild(detached)
          .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
        // The middle child hands its grant to a grandchild and returns at once.
        const grandchild = await ctx.awaitChild<string>(await ctx.spawn(middle, null));
        const mine = await ctx
          .execute(own, null)
          .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
        return [code, grandchild, mine];
      },
      { budget: { tokens: 1000 } },
    );
    const r = sup(store).registerFlow(greedy).registerFlow(middle).registerFlow(parent);
    const out = (await (await r.start(parent, null, { id: "g6" })).result()).output as string[];
    expect(out[0]).toBe("LOOM_CHILD_FAILED");
    expect(out[2]).toBe("LOOM_QUOTA_EXCEEDED");
    // The detached child: at most its grant (everything left) plus one delta.
    expect(await spentBy(r, "g6::away#0")).toBeLessThanOrEqual(1000 + 600);
    // The grandchild got nothing: the detached child's spend had used the budget up.
    await until(async () => isTerminal(await r.getState(out[1] ?? "")));
    expect(await spentBy(r, out[1] ?? "")).toBe(0);
  });

  it("O6, F10: open grants travel with a rotation and are released when the child's slot settles in the successor", async () => {
    const store = memoryStore();
    const small = step$("small", async (_: null, ectx) => {
      ectx.meter({ tokens: { input: 100 } });
      return "ok";
    });
    const parent = flow$(
      "rotating-parent",
      async (ctx, input: { child: ChildHandle } | null) => {
        if (input === null) {
          const child = await ctx.spawn(waiter, null, { key: "w" });
          return ctx.continueAsNew({ child });
        }
        const code = await ctx
          .awaitChild(input.child)
          .catch((e: unknown) => (isLoomError(e) ? e.code : "other"));
        return [code, await ctx.execute(small, null)];
      },
      { budget: { tokens: 1000 } },
    );
    const r = sup(store).registerFlow(waiter).registerFlow(parent);
    await r.start(parent, null, { id: "rg" });
    await logged(r, "rg~1");
    expect((await r.waitForCompletion("rg~1")).output).toEqual(["LOOM_CHILD_FAILED", "ok"]);
  });

  it("O1: a fork of a parent replays its spawns without starting children of its own, on a runtime without the child's flow", async () => {
    const store = memoryStore();
    const parent = flow$("forkable", async (ctx) => {
      const v = await ctx.awaitChild<number>(await ctx.spawn(double, 5));
      const more = await ctx.receive<string>();
      return [v, more];
    });
    const r = sup(store).registerFlow(double).registerFlow(parent);
    await r.start(parent, null, { id: "fk" });
    await until(async () => (await r.getState("fk")).status === "parked");
    const at = (await r.readLog("fk")).length - 1;
    const other = sup(store).registerFlow(parent);
    await other.fork("fk", at, "fk-copy");
    await other.send("fk-copy", "hi");
    expect((await other.waitForCompletion("fk-copy")).output).toEqual([10, "hi"]);
    expect(await store.head("fk-copy::double#0")).toBe(-1);
  });

  it("a runtime with background off starts no background loop when a cancel writes wake rows", async () => {
    const inner = memoryStore();
    let polls = 0;
    const store: Store = {
      ...inner,
      dueTimers: (now, limit) => (polls++, inner.dueTimers(now, limit)),
    };
    const parent = flow$("bg-parent", async (ctx) => ctx.awaitChild(await ctx.spawn(waiter, null)));
    const r = sup(store, { background: false }).registerFlow(waiter).registerFlow(parent);
    await r.start(parent, null, { id: "bg" });
    await until(async () => (await r.getState("bg")).status === "parked");
    polls = 0;
    await r.cancel("bg");
    await new Promise((res) => setTimeout(res, 150));
    expect(polls).toBe(0);
  });
});

describe("fixes of what the simulator found in children (docs/simulation.md)", () => {
  it("seed 1: a store that fails while awaitChild reads the child's outcome stops the run without an outcome; recovery completes it", async () => {
    const inner = memoryStore();
    const armed = { on: false, failed: 0 };
    const store: Store = {
      ...inner,
      read: (id, from, limit) => {
        if (armed.on && id === "sf::waiter#0") {
          armed.on = false;
          armed.failed++;
          return Promise.reject(new Error("the store is unreachable"));
        }
        return inner.read(id, from, limit);
      },
    };
    const parent = flow$("store-fails", async (ctx) => {
      const child = await ctx.spawn(waiter, null);
      // Armed once the child's log exists: awaitChild reads an ended child's outcome only then
      // (a step's result reaches the body before its commit, and the child's start may not be
      // committed yet when the body goes on). Armed once only: the stopped run's result of this
      // step may be lost with it (fenced by this runtime's own recovery), and the re-run arms
      // nothing again.
      await ctx.run("arm", async () => {
        await until(async () => (await inner.head("sf::waiter#0")) >= 0);
        return (armed.on = armed.failed === 0);
      });
      return ctx.awaitChild<string>(child);
    });
    const first = sup(store, { onError: () => undefined })
      .registerFlow(waiter)
      .registerFlow(parent);
    await first.start(parent, null, { id: "sf" });
    await until(() => armed.failed === 1);
    await first.close();
    // The failure was not the flow's: nothing records it, and a runtime recovering it finishes.
    const log = await inner.read("sf", 0, 100);
    expect(log.map((e) => e.kind)).not.toContain("EXECUTION_FAILED");
    const second = sup(inner).registerFlow(waiter).registerFlow(parent);
    await until(async () => (await inner.read("sf", 0, 100)).some((e) => e.kind === "SUSPENDED"));
    await second.send("sf::waiter#0", "recovered");
    expect((await second.waitForCompletion("sf")).output).toBe("recovered");
  });

  it("seed 57: a fork made while its origin's child runs settles its wait when that child ends (V5, W3)", async () => {
    const store = memoryStore();
    const parent = flow$("fork-waits", async (ctx) =>
      ctx.awaitChild<string>(await ctx.spawn(waiter, null)),
    );
    const r = sup(store, { pollIntervalMs: 20 }).registerFlow(waiter).registerFlow(parent);
    await r.start(parent, null, { id: "fw" });
    await until(async () => (await statusOf(r, "fw")) === "parked");
    await until(async () => (await statusOf(r, "fw::waiter#0")) === "parked");
    const at = (await r.readLog("fw")).length - 1;
    await r.fork("fw", at, "fw-copy");
    // The copy watches the origin's child: nothing of it starts a child of its own.
    expect((await store.dueTimers(Number.MAX_SAFE_INTEGER, 10)).map((t) => t.timerId)).toContain(
      "watch:fw::waiter#0",
    );
    await r.send("fw::waiter#0", "done");
    expect((await r.waitForCompletion("fw")).output).toBe("done");
    expect((await r.waitForCompletion("fw-copy")).output).toBe("done");
    expect(await store.head("fw-copy::waiter#0")).toBe(-1);
    // The watch row went once the copy's slot settled.
    await until(async () => (await store.nextWakeAt()) === undefined);
  });

  it("seed 24: a slot settled by awaitChild before its generation continued is not settled again in the successor", async () => {
    const store = memoryStore();
    const parent = flow$("settle-then-rotate", async (ctx, input: null | "next") => {
      if (input === "next") return ctx.receive<string>();
      const child = await ctx.spawn(double, 4);
      await ctx.run("until child ended", async () => {
        await until(async () => (await store.read("sr::double#0", 0, 100)).length >= 3);
        return true;
      });
      await ctx.awaitChild<number>(child);
      return ctx.continueAsNew("next");
    });
    // Background off: the wake row the child's end wrote stays until another runtime fires it,
    // after the parent settled the slot itself and continued.
    const quiet = sup(store, { background: false }).registerFlow(double).registerFlow(parent);
    await quiet.start(parent, null, { id: "sr" });
    await until(async () => (await store.head("sr~1")) >= 0);
    await until(async () => (await statusOf(quiet, "sr~1")) === "parked");
    expect((await store.dueTimers(Number.MAX_SAFE_INTEGER, 10)).map((t) => t.timerId)).toContain(
      "child:sr::double#0",
    );
    const firing = sup(store, { pollIntervalMs: 20 }).registerFlow(double).registerFlow(parent);
    await until(async () => (await store.nextWakeAt()) === undefined);
    expect((await firing.readLog("sr~1")).map((e) => e.kind)).not.toContain("CHILD_DONE");
    const gen0 = (await firing.readLog("sr")).filter((e) => e.kind === "CHILD_DONE");
    expect(gen0).toHaveLength(1);
  });

  it("seed 346: a child that ends while its parent rotates settles the successor's carried slot, not the predecessor's", async () => {
    const inner = memoryStore();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((res) => (release = res));
    const gated = { hit: false };
    // The rotation's write of its successor's sequence 0 is held: the carry is made, and the
    // successor not yet written. (A start with a fresh id writes before it reads anything.)
    const store: Store = {
      ...inner,
      appendMany: async (batches) => {
        if (!gated.hit && batches.some((b) => b.executionId === "wd~1")) {
          gated.hit = true;
          await gate;
        }
        return inner.appendMany(batches);
      },
    };
    const parent = flow$("done-in-window", async (ctx, input: { kept: ChildHandle } | null) => {
      if (input !== null) return ctx.awaitChild<string>(input.kept);
      const kept = await ctx.spawn(waiter, null, { key: "kept", detached: true });
      await ctx.run("until child parked", async () => {
        await until(async () => (await inner.read("wd::kept#0", 0, 100)).length >= 2);
        return true;
      });
      return ctx.continueAsNew({ kept });
    });
    const r = sup(store, { pollIntervalMs: 20 }).registerFlow(waiter).registerFlow(parent);
    await r.start(parent, null, { id: "wd" });
    await until(() => gated.hit);
    // The rotation is under way (its successor's start is held, and with it this runtime's
    // journal): the child ends now, driven by another runtime on the same log.
    const other = sup(inner).registerFlow(waiter).registerFlow(parent);
    await other.send("wd::kept#0", "late");
    await until(async () => (await statusOf(other, "wd::kept#0")) === "completed");
    await new Promise((res) => setTimeout(res, 200));
    release();
    expect((await r.waitForCompletion("wd~1")).output).toBe("late");
    const kinds = (await r.readLog("wd")).map((e) => e.kind);
    expect(kinds).not.toContain("CHILD_DONE");
    expect(kinds[kinds.length - 1]).toBe("EXECUTION_CONTINUED");
    const successor = await r.getState("wd~1");
    expect(successor._children?.["wd::kept#0"]?.outcome?.status).toBe("completed");
  });
});

describe("fixes from the review of those fixes", () => {
  it("a restore onto a new id of a parent waiting on its child settles when the child ends (W3)", async () => {
    const store = memoryStore();
    const parent = flow$("restore-waits", async (ctx) =>
      ctx.awaitChild<string>(await ctx.spawn(waiter, null)),
    );
    const r = sup(store).registerFlow(waiter).registerFlow(parent);
    await r.start(parent, null, { id: "rw" });
    await until(async () => (await statusOf(r, "rw")) === "parked");
    await until(async () => (await statusOf(r, "rw::waiter#0")) === "parked");
    const copy = await r.restoreFromState("rw-copy", parent, await r.getState("rw"));
    await r.send("rw::waiter#0", "ended");
    expect((await r.waitForCompletion("rw")).output).toBe("ended");
    expect((await copy.result()).output).toBe("ended");
    expect(await store.head("rw-copy::waiter#0")).toBe(-1);
  });

  it("a restore to a state from before its child's CHILD_DONE settles the restored wait from the log (R1)", async () => {
    const store = memoryStore();
    const parent = flow$("restore-settled", async (ctx) => {
      const first = await ctx.awaitChild<string>(await ctx.spawn(waiter, null));
      return [first, await ctx.receive<string>()];
    });
    const r = sup(store).registerFlow(waiter).registerFlow(parent);
    const h = await r.start(parent, null, { id: "rs" });
    await until(async () => (await store.head("rs::waiter#0")) >= 0);
    await until(async () => (await statusOf(r, "rs::waiter#0")) === "parked");
    await until(async () => (await statusOf(r, "rs")) === "parked");
    const waiting = await r.getState("rs");
    await r.send("rs::waiter#0", "child said");
    await until(
      async () => (await r.getState("rs"))._children?.["rs::waiter#0"]?.outcome !== undefined,
    );
    await r.restoreFromState("rs", parent, waiting);
    await r.send("rs", "then this");
    expect((await h.result()).output).toEqual(["child said", "then this"]);
  });

  it("a fork of a successor keeps its carried child slots, and awaits the carried child", async () => {
    const store = memoryStore();
    const parent = flow$("fork-carried", async (ctx, input: { kept: ChildHandle } | null) => {
      if (input === null) {
        const kept = await ctx.spawn(waiter, null, { key: "kept", detached: true });
        return ctx.continueAsNew({ kept });
      }
      const go = await ctx.receive<string>();
      return [go, await ctx.awaitChild<string>(input.kept)];
    });
    const r = sup(store).registerFlow(waiter).registerFlow(parent);
    await r.start(parent, null, { id: "fc" });
    await until(async () => (await store.head("fc~1")) >= 0);
    await until(async () => (await statusOf(r, "fc~1")) === "parked");
    await r.fork("fc~1", 0, "fc-fork");
    expect(Object.keys((await r.getState("fc-fork"))._children ?? {})).toEqual(["fc::kept#0"]);
    await r.send("fc-fork", "go");
    await r.send("fc", "go");
    await r.send("fc::kept#0", "kept said");
    expect((await r.waitForCompletion("fc-fork")).output).toEqual(["go", "kept said"]);
    expect((await r.waitForCompletion("fc~1")).output).toEqual(["go", "kept said"]);
  });
});

function isTerminal(s: ExecutionState): boolean {
  return ["completed", "failed", "cancelled", "continued"].includes(s.status);
}
