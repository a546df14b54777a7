/**
 * Red team of d814345 (issue 23 item 1): a step's result handed to the body once queued (R1's
 * barrier), and a start that writes sequence 0 before it reads (W5). Each test holds or fails a
 * store's appendMany to make the window between a queue and its commit certain.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  memoryStore,
  type AppendBatch,
  type Runtime,
  type Store,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { until } from "./helpers.ts";

const open: Runtime[] = [];
const gates: (() => void)[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const release of gates.splice(0)) release();
  await Promise.all(open.splice(0).map((r) => r.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A store whose appendMany is held, while `hold` says so of a call's batches, until released. */
function holding(inner: Store, hold: (batches: readonly AppendBatch[]) => boolean) {
  const gate = { held: 0, release: () => undefined as void };
  const opened = new Promise<void>((res) => (gate.release = res));
  const store: Store = {
    ...inner,
    appendMany: async (batches) => {
      if (hold(batches)) {
        gate.held++;
        await opened;
      }
      return inner.appendMany(batches);
    },
  };
  gates.push(() => gate.release());
  return { store, gate };
}

const startsOf = (id: string) => (batches: readonly AppendBatch[]) =>
  batches.some((b) => b.executionId === id && b.events.some((e) => e.kind === "EXECUTION_STARTED"));

const oneStep = flow$("redteam-one-step", async (ctx, n: number) => ctx.run("only", () => n + 1));

describe("a start whose id exists under another principal (W4, W5, ADR 0111)", () => {
  it("while its refused write is in flight, the intruder is not authorized by its own unwritten start", async () => {
    const inner = memoryStore();
    let armed = false;
    const { store, gate } = holding(inner, (b) => armed && startsOf("x")(b));
    const r = createRuntime({ store, pollIntervalMs: 60_000 });
    open.push(r);
    r.registerFlow(oneStep);
    await (await r.start(oneStep, 1, { id: "x", principal: "alice" })).result();
    armed = true;
    const intruder = r.start(oneStep, 1, { id: "x", principal: "mallory" });
    const refused = intruder.then(
      () => "adopted",
      (e: { code?: string }) => e.code,
    );
    await until(() => gate.held > 0);
    // The write that the store will refuse is in flight: nothing of mallory's is in the log.
    await expect(r.getState("x", { as: "mallory" })).rejects.toMatchObject({
      code: "LOOM_UNAUTHORIZED",
    });
    await expect(r.readLog("x", { as: "mallory" })).rejects.toMatchObject({
      code: "LOOM_UNAUTHORIZED",
    });
    // Its owner is not refused meanwhile.
    expect((await r.getState("x", { as: "alice" })).status).toBe("completed");
    armed = false;
    gate.release();
    expect(await refused).toBe("LOOM_UNAUTHORIZED");
    expect((await inner.read("x")).map((e) => e.kind)).toEqual([
      "EXECUTION_STARTED",
      "STEP_COMPLETED",
      "EXECUTION_COMPLETED",
    ]);
  });
});

const waiting = flow$("redteam-waiting", async (ctx) => {
  const got = await ctx.receive<string>();
  return `got ${got}`;
});

describe("a send by the owner while another principal's refused start is in flight", () => {
  it("is judged on the log, not on the unwritten start", async () => {
    const inner = memoryStore();
    let armed = false;
    const { store, gate } = holding(inner, (b) => armed && startsOf("w")(b));
    const driver = createRuntime({ store: inner, pollIntervalMs: 20 });
    open.push(driver);
    driver.registerFlow(waiting);
    await driver.start(waiting, null, { id: "w", principal: "alice" });
    await until(async () => (await driver.getState("w", { as: "alice" })).status === "parked");
    const r = createRuntime({ store, pollIntervalMs: 20 });
    open.push(r);
    r.registerFlow(waiting);
    armed = true;
    const intruder = r.start(waiting, null, { id: "w", principal: "mallory" }).then(
      () => "adopted",
      (e: { code?: string }) => e.code,
    );
    await until(() => gate.held > 0);
    // The send is judged (and its message written) in the window; its wake waits for the start.
    const sent = r.send("w", "hello", { as: "alice" });
    let settled = false;
    const outcome = sent.then(
      () => "sent",
      (e: { code?: string }) => e.code,
    );
    void outcome.finally(() => (settled = true));
    await until(async () => settled || (await inner.readMessages("w", "main", -1, 10)).length > 0);
    armed = false;
    gate.release();
    expect(await outcome).toBe("sent");
    expect(await intruder).toBe("LOOM_UNAUTHORIZED");
    expect(await driver.waitForCompletion("w", { as: "alice", timeoutMs: 10_000 })).toMatchObject({
      status: "completed",
      output: "got hello",
    });
  });
});

/** A store that holds the first commit `matches` picks, then fails it (a store error). */
function holdThenFail(inner: Store, matches: (batches: readonly AppendBatch[]) => boolean) {
  const gate = { held: 0, release: () => undefined as void };
  const opened = new Promise<void>((res) => (gate.release = res));
  gates.push(() => gate.release());
  const store: Store = {
    ...inner,
    appendMany: async (batches) => {
      if (gate.held === 0 && matches(batches)) {
        gate.held++;
        await opened;
        throw new Error("disk went away");
      }
      return inner.appendMany(batches);
    },
  };
  return { store, gate };
}

const settles = (id: string, callId: string) => (batches: readonly AppendBatch[]) =>
  batches.some(
    (b) =>
      b.executionId === id &&
      b.events.some(
        (e) => e.kind === "STEP_COMPLETED" && JSON.stringify(e.payload).includes(`${callId}"`),
      ),
  );

describe("R1 held: nothing after a step reaches outside before its result is durable", () => {
  it("a child spawned right after a step is not started while that step's commit is held, nor if it fails", async () => {
    const base = memoryStore();
    const written = new Set<string>();
    const inner: Store = {
      ...base,
      appendMany: (batches) => {
        for (const b of batches) written.add(b.executionId);
        return base.appendMany(batches);
      },
    };
    const { store, gate } = holdThenFail(inner, settles("p", "a#0"));
    const ran = { a: 0, child: 0 };
    const child = flow$("redteam-child", async (ctx) => ctx.run("c", () => ++ran.child));
    const parent = flow$("redteam-parent", async (ctx) => {
      await ctx.run("a", () => ++ran.a);
      const h = await ctx.spawn(child, null);
      return ctx.awaitChild(h);
    });
    const r = createRuntime({ store, leaseTtlMs: 200, pollIntervalMs: 20 });
    open.push(r);
    r.registerFlow(child).registerFlow(parent);
    await r.start(parent, null, { id: "p" });
    await until(() => gate.held > 0);
    await new Promise((res) => setTimeout(res, 50));
    expect(ran.child).toBe(0);
    expect([...written]).toEqual(["p"]);
    gate.release();
    const outcome = await r.waitForCompletion("p", { timeoutMs: 10_000 });
    expect(outcome).toMatchObject({ status: "completed", output: 1 });
    // a ran twice (its first result was lost), the child once, after a was durable.
    expect(ran).toEqual({ a: 2, child: 1 });
  });

  it("a body that ends right after a step reports no outcome its log does not hold", async () => {
    const inner = memoryStore();
    const { store, gate } = holdThenFail(inner, settles("e", "only#0"));
    let n = 0;
    const counting = flow$("redteam-ends", async (ctx) => ctx.run("only", () => ++n));
    const r = createRuntime({ store, leaseTtlMs: 200, pollIntervalMs: 20 });
    open.push(r);
    r.registerFlow(counting);
    const handle = await r.start(counting, null, { id: "e" });
    let early: unknown;
    void handle.result().then(
      (o) => (early ??= o),
      () => undefined,
    );
    await until(() => gate.held > 0);
    await new Promise((res) => setTimeout(res, 50));
    expect(early).toBeUndefined();
    expect((await r.getState("e")).status).not.toBe("completed");
    expect((await r.readLog("e")).map((e) => e.kind)).toEqual(["EXECUTION_STARTED"]);
    gate.release();
    const outcome = await r.waitForCompletion("e", { timeoutMs: 10_000 });
    const log = await inner.read("e");
    expect(outcome).toMatchObject({ status: "completed", output: 2 });
    expect(log.at(-1)).toMatchObject({ kind: "EXECUTION_COMPLETED", payload: { output: 2 } });
    await until(() => early !== undefined);
    expect(early).toEqual(outcome);
  });
});

describe("a caller waiting while a repeat start's refused write is in flight", () => {
  it("still learns the outcome the log holds", async () => {
    const inner = memoryStore();
    let armed = false;
    const { store, gate } = holding(inner, (b) => armed && startsOf("h")(b));
    const driver = createRuntime({ store: inner, pollIntervalMs: 20 });
    open.push(driver);
    driver.registerFlow(waiting);
    await driver.start(waiting, null, { id: "h" });
    await until(async () => (await driver.getState("h")).status === "parked");
    const r = createRuntime({ store, pollIntervalMs: 20 });
    open.push(r);
    r.registerFlow(waiting);
    armed = true;
    // A repeat start (same caller, same input): it adopts once its write is refused.
    const again = r.start(waiting, null, { id: "h" });
    await until(() => gate.held > 0);
    const waited = r.waitForCompletion("h", { timeoutMs: 5_000 });
    await new Promise((res) => setTimeout(res, 30));
    armed = false;
    gate.release();
    await again;
    await driver.send("h", "late");
    expect(await waited).toMatchObject({ status: "completed", output: "got late" });
  });
});

describe("concurrent starts of one id from two runtimes (W4, W5)", () => {
  for (const kind of ["memory", "sqlite"] as const) {
    it(`on ${kind}: one owner wins, the other is refused or adopts, one start in the log`, async () => {
      let stores: [Store, Store];
      if (kind === "memory") {
        const m = memoryStore();
        stores = [m, m];
      } else {
        const dir = mkdtempSync(join(tmpdir(), "loom-redteam-"));
        dirs.push(dir);
        stores = [sqliteStore(join(dir, "s.db")), sqliteStore(join(dir, "s.db"))];
      }
      const a = createRuntime({ store: stores[0], pollIntervalMs: 60_000 });
      const b = createRuntime({ store: stores[1], pollIntervalMs: 60_000 });
      open.push(a, b);
      for (let i = 0; i < 20; i++) {
        const id = `c${i}`;
        const same = i % 2 === 0;
        const results = await Promise.allSettled([
          a.start(oneStep, 1, { id, principal: "alice" }),
          b.start(oneStep, same ? 1 : 2, { id, principal: same ? "alice" : "bob" }),
        ]);
        const log = await stores[0].read(id);
        expect(log.filter((e) => e.kind === "EXECUTION_STARTED")).toHaveLength(1);
        const owner = (log[0]?.payload as { principal?: string } | undefined)?.principal;
        if (same) {
          expect(results.map((x) => x.status)).toEqual(["fulfilled", "fulfilled"]);
        } else {
          expect(results.filter((x) => x.status === "fulfilled")).toHaveLength(1);
          const winner = results[0].status === "fulfilled" ? "alice" : "bob";
          expect(owner).toBe(winner);
          const loser = results.find((x) => x.status === "rejected");
          expect(loser).toMatchObject({ reason: { code: "LOOM_UNAUTHORIZED" } });
        }
        await a.waitForCompletion(id, { as: owner, timeoutMs: 10_000 });
      }
    });
  }
});

describe("a cancel arriving between a step's queue and its failed commit", () => {
  it("reports nothing the log does not hold", async () => {
    const inner = memoryStore();
    const { store, gate } = holdThenFail(inner, settles("k", "only#0"));
    const sleepy = flow$("redteam-sleepy", async (ctx) => {
      await ctx.run("only", () => 1);
      await ctx.sleep(60_000);
      return "woke";
    });
    const r = createRuntime({ store, leaseTtlMs: 200, pollIntervalMs: 20 });
    open.push(r);
    r.registerFlow(sleepy);
    const handle = await r.start(sleepy, null, { id: "k" });
    await until(() => gate.held > 0);
    const cancelled = handle.cancel().then(
      (v) => ({ ok: v }),
      (e: { code?: string }) => ({ error: e.code }),
    );
    await new Promise((res) => setTimeout(res, 30));
    gate.release();
    const said = await cancelled;
    if ("ok" in said) {
      // A cancel that reported success is in the log, and the execution ends cancelled.
      const outcome = await r.waitForCompletion("k", { timeoutMs: 10_000 });
      expect(outcome.status).toBe("cancelled");
      expect((await inner.read("k")).at(-1)?.kind).toBe("EXECUTION_CANCELLED");
    } else {
      expect((await inner.read("k")).map((e) => e.kind)).not.toContain("EXECUTION_CANCELLED");
    }
  });
});

describe("parallel branches: one branch's queued result seen by another branch's step code", () => {
  it("a step's code runs only once every result the body holds is durable", async () => {
    const inner = memoryStore();
    // First commit held: branch x's result. Second, held then failed: branch a's result.
    const first = holding(inner, (b) => settles("par", "x#0")(b));
    const { store, gate } = holdThenFail(first.store, settles("par", "a#0"));
    const outside: string[] = [];
    let handed = false;
    let aReturned = false;
    let ranA = 0;
    const flow = flow$("redteam-parallel", async (ctx) => {
      let shared = "none";
      await ctx.parallel([
        async (c) => {
          shared = await c.run("a", async () => {
            // Finishes while x's commit is held: its result is queued behind it.
            await until(() => first.gate.held > 0);
            aReturned = true;
            return `a-${++ranA}`;
          });
          handed = true;
        },
        async (c) => {
          await c.run("x", () => "x");
          await c.run("b", () => void outside.push(shared));
        },
      ]);
      return shared;
    });
    const r = createRuntime({ store, leaseTtlMs: 200, pollIntervalMs: 20 });
    open.push(r);
    r.registerFlow(flow);
    await r.start(flow, null, { id: "par" });
    await until(() => first.gate.held > 0);
    await until(() => aReturned);
    await new Promise((res) => setTimeout(res, 50));
    // Beside another branch, a step's result waits for its commit (R1, handOver): a's is queued
    // behind x's held commit and not handed to the body yet.
    expect(handed).toBe(false);
    first.gate.release();
    await until(() => gate.held > 0);
    await new Promise((res) => setTimeout(res, 50));
    // a's result is not durable (its commit is held, and will fail): b's code has not used it.
    expect(outside).toEqual([]);
    gate.release();
    const outcome = await r.waitForCompletion("par", { timeoutMs: 10_000 });
    expect(outcome).toMatchObject({ status: "completed", output: "a-2" });
    // Only the re-run's b ran (before or after its a), never on the lost "a-1".
    expect(outside).toHaveLength(1);
    expect(outside).not.toContain("a-1");
  });
});
