/**
 * Runaway chains (ADR 0109 residual (2), docs/architecture.md "Runaway chains"): a flow that
 * rotates without consuming anything is not rate-limited by the kernel, and `maxChainHops` does
 * not bound it; its chain deadline does, and a cancel of any of its ids stops it for good (K4).
 * These pin what the docs promise an operator.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, type Runtime } from "../src/index.ts";
import { until } from "./helpers.ts";

/** Not the suite's `runtimes()`: its after-test replay of every execution would replay each generation. */
const open: Runtime[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});
const chains = (extra = {}) => {
  const r = createRuntime({ store: memoryStore(), features: { continueAsNew: true }, ...extra });
  open.push(r);
  return r;
};

/** Rotates at once, every generation, consuming nothing. */
const runaway = flow$("runaway", async (ctx, n: number | null) => ctx.continueAsNew((n ?? 0) + 1));

const generationOf = async (r: Runtime, id: string) =>
  (await r.getState(await r.followToHead(id)))._chain?.generation ?? 0;

describe("runaway chains (ADR 0109 residual (2))", () => {
  it("residual (2), K6: maxChainHops does not bound rotations; the head stays routable", async () => {
    const r = chains({ maxChainHops: 2 }).registerFlow(runaway);
    await r.start(runaway, null, { id: "rw" });
    await until(async () => (await generationOf(r, "rw")) >= 20);
    expect(await r.cancel("rw", "enough")).toBe(true);
  });

  it("residual (2), K4: a cancel of the chain's first id stops it: the head is cancelled and nothing follows it", async () => {
    const r = chains().registerFlow(runaway);
    await r.start(runaway, null, { id: "rc" });
    await until(async () => (await generationOf(r, "rc")) >= 5);
    expect(await r.cancel("rc", "runaway")).toBe(true);
    // A rotation racing the cancel may have started one more generation, which cancels itself
    // (K4): the chain settles with a cancelled head, and given time nothing runs past it.
    await until(async () => (await r.getState(await r.followToHead("rc"))).status === "cancelled");
    await new Promise((resolve) => setTimeout(resolve, 100));
    const head = await r.followToHead("rc");
    expect((await r.getState(head)).status).toBe("cancelled");
    expect(await r.readLog(`rc~${(await generationOf(r, "rc")) + 1}`)).toEqual([]);
  });

  it("residual (2), D3: a runaway chain started with a deadline is cancelled at its chain deadline", async () => {
    const r = chains().registerFlow(runaway);
    await r.start(runaway, null, { id: "rd", deadlineMs: 200 });
    let head = await r.getState("rd");
    await until(async () => {
      head = await r.getState(await r.followToHead("rd"));
      return head.status === "cancelled";
    });
    expect(head._chain?.generation ?? 0).toBeGreaterThan(0);
    // The generation the deadline cancelled is the head, or, when it had started its successor
    // in the rotation window, the head's predecessor (the head then cancelled itself, K4).
    if (head.error?.code !== "LOOM_DEADLINE_EXCEEDED") {
      expect(head.error?.code).toBe("LOOM_CANCELLED");
      head = await r.getState(head._chain?.continuedFrom?.executionId ?? "");
    }
    expect(head.status).toBe("cancelled");
    expect(head.error?.code).toBe("LOOM_DEADLINE_EXCEEDED");
  });
});
