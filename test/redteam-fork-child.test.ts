/**
 * Red team (composition: forks and children): a fork of a child is a new execution, not the
 * child. Its end must not settle the parent's wait on the real child (children.ts O2; fork.ts V1).
 */
import { describe, expect, it } from "vitest";
import { flow$, memoryStore } from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();

const kid = flow$("kid", async (ctx) => ctx.suspend<string>());
const parent = flow$("parent", async (ctx) => {
  const c = await ctx.spawn(kid, null, { key: "k" });
  return ctx.awaitChild<string>(c);
});

describe("red team: a fork of a child", () => {
  it("the fork's end does not answer the parent's awaitChild for the real child", async () => {
    const r = rt(memoryStore()).registerFlow(kid).registerFlow(parent);
    await r.start(parent, null, { id: "p" });
    const child = "p::k#0";
    await until(async () => (await r.getState(child).catch(() => undefined))?.status === "parked");
    const log = await r.readLog(child);
    await r.fork(child, log[log.length - 1]!.seq, "impostor");
    await until(async () => (await r.getState("impostor")).status === "parked");
    await r.resume("impostor", "FORGED BY THE FORK");
    await until(async () => (await r.getState("impostor")).status === "completed");
    await new Promise((res) => setTimeout(res, 300));
    const st = await r.getState("p");
    expect(st.status).not.toBe("completed");
    await r.resume(child, "real");
    await until(async () => (await r.getState("p")).status === "completed");
    expect((await r.getState("p")).output).toBe("real");
  });
});
