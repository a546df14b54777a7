/**
 * A send that routes to a chain's head just before the head rotates: the state it then reads says
 * `continued`, with the successor already written. Found by the SQLite crash test (kill point 11,
 * "the chain of talk cannot be followed past talk"): the send was refused although the chain was
 * whole. It follows the chain again instead, and the message is delivered once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, type Runtime, type Store } from "../src/index.ts";
import { until } from "./helpers.ts";

const open: Runtime[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});

const talk = flow$("rotating-talk", async (ctx, gen: number): Promise<string> => {
  const m = await ctx.receive<string>();
  if (gen === 0) return ctx.continueAsNew(1);
  return m;
});

describe("send racing a rotation", () => {
  it("follows the chain again when its head continued between routing and reading it", async () => {
    const inner = memoryStore();
    const gate = { armed: false, hit: false, release: () => undefined as void };
    const released = new Promise<void>((res) => (gate.release = res));
    // The sender's whole read of the head (after routing read its start) waits for the rotation.
    const senderStore: Store = {
      ...inner,
      read: async (id, from, limit) => {
        if (gate.armed && id === "t" && limit === undefined) {
          gate.armed = false;
          gate.hit = true;
          await released;
        }
        return inner.read(id, from, limit);
      },
    };
    const owner = createRuntime({ store: inner, features: { continueAsNew: true } });
    const sender = createRuntime({
      store: senderStore,
      background: false,
      features: { continueAsNew: true },
    });
    open.push(owner, sender);
    owner.registerFlow(talk);
    sender.registerFlow(talk);
    await owner.start(talk, 0, { id: "t" });
    await until(async () => (await inner.read("t")).some((e) => e.kind === "SUSPENDED"));
    gate.armed = true;
    const late = sender.send("t", "second", { key: "k2" });
    await until(() => gate.hit);
    await owner.send("t", "first", { key: "k1" });
    await until(async () => (await inner.read("t")).at(-1)?.kind === "EXECUTION_CONTINUED");
    gate.release();
    await expect(late).resolves.toMatchObject({ chainId: "t" });
    const outcome = await owner.waitForCompletion("t~1", { timeoutMs: 10_000 });
    expect(outcome).toMatchObject({ status: "completed", output: "second" });
  });
});
