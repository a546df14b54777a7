/**
 * `start(..., { drive: false })`: the start is recorded with its lease free, and a worker sharing
 * the store drives it (runtime/fleet.ts L1; on a store without claims, by recovery's scan).
 */
import { describe, expect, it } from "vitest";
import { createRuntime, flow$, isLoomError, memoryStore } from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const tripled = flow$("tripled", async (ctx, n: number) => ctx.run("triple", () => n * 3));

describe("start with drive: false", () => {
  it("records the start without driving it; a worker on the same store claims it, and the handle settles from the log", async () => {
    const store = memoryStore();
    const client = rt(store, { background: false }).registerFlow(tripled);
    const h = await client.start(tripled, 7, { id: "sub", drive: false });
    const log = await client.readLog("sub");
    expect(log.map((e) => e.kind)).toEqual(["EXECUTION_STARTED"]);
    expect((await store.getLease("sub"))?.owner).toBeUndefined();
    rt(store).registerFlow(tripled);
    expect((await h.result()).output).toBe(21);
    // Started again with the same flow and input: the same execution.
    const again = await client.start(tripled, 7, { id: "sub", drive: false });
    expect((await again.result()).output).toBe(21);
  });

  it("is refused when drive is not a boolean, before anything is recorded", async () => {
    const store = memoryStore();
    const client = createRuntime({ store, background: false }).registerFlow(tripled);
    const refused = await client
      .start(tripled, 1, { id: "bad", drive: "no" as unknown as boolean })
      .catch((e: unknown) => e);
    expect(isLoomError(refused, "LOOM_INVALID_INPUT")).toBe(true);
    expect(await store.head("bad")).toBe(-1);
    await client.close();
  });

  it("a worker that is busy to its maxActive leaves the rest for later, and drives them all in the end", async () => {
    const store = memoryStore();
    const client = rt(store, { background: false }).registerFlow(tripled);
    for (let i = 0; i < 10; i++) await client.start(tripled, i, { id: `m${i}`, drive: false });
    rt(store, { maxActive: 2 }).registerFlow(tripled);
    await until(async () => (await client.list({ status: ["completed"] })).length === 10, 10_000);
    for (let i = 0; i < 10; i++) {
      expect((await client.waitForCompletion(`m${i}`)).output).toBe(i * 3);
    }
  });

  it("L1: a fleet member with room for one claims past an execution it cannot drive (a version it does not accept) and drives the next, without claiming in a loop", async () => {
    const store = memoryStore({ fleet: true });
    const v1 = flow$("versioned", async (ctx, n: number) => ctx.run("v", () => n), {
      version: "1",
    });
    const v2 = flow$("versioned", async (ctx, n: number) => ctx.run("v", () => n * 10), {
      version: "2",
    });
    const old = rt(store, { background: false }).registerFlow(v1);
    await old.start(v1, 1, { id: "a-old", drive: false });
    const client = rt(store, { background: false }).registerFlow(v2);
    await client.start(v2, 2, { id: "b-new", drive: false });
    const errors: Error[] = [];
    rt(store.reopen(), { maxActive: 1, onError: (e) => errors.push(e) }).registerFlow(v2);
    expect((await client.waitForCompletion("b-new")).output).toBe(20);
    expect((await client.getState("a-old")).status).not.toBe("completed");
    expect(errors.some((e) => isLoomError(e, "LOOM_FLOW_VERSION"))).toBe(true);
    // Not a claim loop: a-old's fence moved a few times, not thousands.
    expect((await store.getLease("a-old"))?.fence ?? 0).toBeLessThan(100);
  });
});
