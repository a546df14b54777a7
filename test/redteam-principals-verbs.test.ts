/**
 * Red team (issue 22 item 6, ADR 0111, docs/security.md "every verb ... refuses an execution that
 * belongs to another principal"): each verb by mallory on alice's execution is refused.
 */
import { describe, expect, it } from "vitest";
import { flow$, isLoomError, memoryStore } from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();

const waits = flow$("waits", async (ctx, input: { who: string }) => {
  const a = await ctx.run("a", () => `a of ${input.who}`);
  const msg = await ctx.suspend<string>();
  if (msg === "rotate") return ctx.continueAsNew({ who: input.who });
  return { a, msg };
});

async function refusal(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => "no error",
    (e: unknown) => (isLoomError(e) ? e.code : String(e)),
  );
}

async function setup() {
  const store = memoryStore();
  const r = rt(store, { snapshotEvery: 1, features: { continueAsNew: true } }).registerFlow(waits);
  await r.start(waits, { who: "alice" }, { id: "x", principal: "alice" });
  await until(async () => (await r.getState("x", { as: "alice" })).status === "parked");
  await r.start(waits, { who: "mallory" }, { id: "m", principal: "mallory" });
  await until(async () => (await r.getState("m", { as: "mallory" })).status === "parked");
  return r;
}

const M = { as: "mallory" } as const;

describe("red team: every verb refuses another principal", () => {
  it("waitForCompletion", async () => {
    const r = await setup();
    expect(await refusal(r.waitForCompletion("x", { ...M, timeoutMs: 50 }))).toBe(
      "LOOM_UNAUTHORIZED",
    );
  });
  it("handle(...).result() and cancel()", async () => {
    const r = await setup();
    const h = r.handle("x", M);
    expect(await refusal(h.cancel("mine now"))).toBe("LOOM_UNAUTHORIZED");
    expect((await r.getState("x", { as: "alice" })).status).toBe("parked");
  });
  it("compact", async () => {
    const r = await setup();
    expect(await refusal(r.compact("x", { ...M, snapshotFirst: true }))).toBe("LOOM_UNAUTHORIZED");
  });
  it("verifyLog", async () => {
    const r = await setup();
    expect(await refusal(r.verifyLog("x", M))).toBe("LOOM_UNAUTHORIZED");
  });
  it("followToHead", async () => {
    const r = await setup();
    expect(await refusal(r.followToHead("x", M))).toBe("LOOM_UNAUTHORIZED");
  });
  it("resumeAs", async () => {
    const r = await setup();
    expect(await refusal(r.resumeAs("x", "waits", "from mallory", M))).toBe("LOOM_UNAUTHORIZED");
    expect((await r.getState("x", { as: "alice" })).status).toBe("parked");
  });
  it("restoreFromState onto alice's id", async () => {
    const r = await setup();
    const st = await r.getState("m", M);
    expect(await refusal(r.restoreFromState("x", "waits", st, M))).toBe("LOOM_UNAUTHORIZED");
  });
  it("fork of mallory's own execution onto alice's existing id does not touch it", async () => {
    const r = await setup();
    const before = (await r.readLog("x", { as: "alice" })).length;
    await refusal(r.fork("m", 1, "x", M));
    expect((await r.readLog("x", { as: "alice" })).length).toBe(before);
    expect((await r.getState("x", { as: "alice" }))._principal).toBe("alice");
  });
  it("send to alice's successor id (x~1) after a rotation", async () => {
    const r = await setup();
    await r.resume("x", "rotate", { as: "alice" });
    await until(
      async () =>
        (await r.getState("x~1", { as: "alice" }).catch(() => undefined))?.status === "parked",
    );
    expect(await refusal(r.send("x~1", "hi", M))).toBe("LOOM_UNAUTHORIZED");
    expect(await refusal(r.resume("x", "hi", M))).toBe("LOOM_UNAUTHORIZED");
    expect(await refusal(r.getState("x~1", M))).toBe("LOOM_UNAUTHORIZED");
  });
  it("mallory's fork onto a fresh id of alice's chain-shaped id is refused", async () => {
    const r = await setup();
    expect(await refusal(r.fork("m", 1, "x::k#0", M))).not.toBe("no error");
    expect(await refusal(r.fork("m", 1, "x~1", M))).not.toBe("no error");
    expect(await refusal(r.fork("m", 1, "nightly@2026-01-01T00:00:00.000Z", M))).not.toBe(
      "no error",
    );
  });
  it("restoreFromState creating reserved shapes is refused", async () => {
    const r = await setup();
    const st = await r.getState("m", M);
    expect(await refusal(r.restoreFromState("x::k#0", "waits", st, M))).not.toBe("no error");
    expect(
      await refusal(r.restoreFromState("nightly@2026-01-01T00:00:00.000Z", "waits", st, M)),
    ).not.toBe("no error");
  });
  it("list({as}) hides alice's executions; schedules with as", async () => {
    const r = await setup();
    const ids = (await r.list({ as: "mallory" })).map(
      (e) => e.executionId ?? (e as { id?: string }).id,
    );
    expect(ids).not.toContain("x");
  });
});
