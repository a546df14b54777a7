/**
 * Red team of d814345 (issue 23 item 1): a step's result handed to the body once queued (R1's
 * barrier), and a start that writes sequence 0 before it reads (W5). Each test holds or fails a
 * store's appendMany to make the window between a queue and its commit certain.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  memoryStore,
  type AppendBatch,
  type Runtime,
  type Store,
} from "../src/index.ts";

const open: Runtime[] = [];
const gates: (() => void)[] = [];
afterEach(async () => {
  for (const release of gates.splice(0)) release();
  await Promise.all(open.splice(0).map((r) => r.close()));
});

async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((res) => setTimeout(res, 5));
  }
  throw new Error("condition never held");
}

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
