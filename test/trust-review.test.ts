/**
 * What an adversarial review of issue 10 found, each kept as a test that fails without its fix:
 * the subject index trusted blindly (erase-subject.ts X4), an erased compacted log that no longer
 * folded (X5), a successor whose link broke when its predecessor was compacted (verify.ts K5),
 * a message shaped like a sealed value taken for one (sealed-store.ts V8), a repeat start that
 * changed the subject, a log missing its sequence 0 that verified (K3), an erased start that lost
 * its owner (V7), and isolated() dropping an effect's taint guard.
 */
import { describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  isLoomError,
  isolated,
  memoryStore,
  taint,
  type Runtime,
} from "../src/index.ts";
import { shell } from "./fixtures/taint/effects.ts";
import { until } from "./helpers.ts";

const steps = flow$("steps", async (ctx, input: { secret: string; park?: boolean }) => {
  await ctx.run("a", () => `${input.secret}-a`);
  await ctx.run("b", () => `${input.secret}-b`);
  if (input.park) await ctx.suspend({ timeout: 600_000 });
  return "ok";
});

function runtime(opts: Parameters<typeof createRuntime>[0]): Runtime {
  return createRuntime({ pollIntervalMs: 20, ...opts }).registerFlow(steps);
}

describe("trust, after review", () => {
  it("X4: an index entry left by a refused fork does not make eraseSubject touch another subject's execution", async () => {
    const r = runtime({ store: memoryStore() });
    await r.start("steps", { secret: "bob", park: true }, { id: "bob-1", subject: "bob" });
    await (await r.start("steps", { secret: "al" }, { id: "al-1", subject: "alice" })).result();
    await until(async () => (await r.getState("bob-1")).status === "parked");
    const refused = await r.fork("al-1", 1, "bob-1").catch((e: unknown) => e);
    expect(isLoomError(refused, "LOOM_EXECUTION_CONFLICT")).toBe(true);
    const erasure = await r.eraseSubject("alice");
    expect(erasure.executions).toEqual(["al-1"]);
    const bob = await r.getState("bob-1");
    expect(bob.status).toBe("parked");
    expect(bob._erased).toBeUndefined();
    await r.close();
  });

  it("X5, K5: an erased compacted log still folds to its end and owner, and its successor's link is 'compacted', not broken", async () => {
    const chat = flow$("chat", async (ctx, input: { n: number }) => {
      await ctx.run("say", () => `turn ${input.n}`);
      if (input.n === 0) return ctx.continueAsNew({ n: 1 });
      return "bye";
    });
    const r = createRuntime({
      store: memoryStore(),
      audit: true,
      snapshotEvery: 1,
      features: { continueAsNew: true },
    }).registerFlow(chat);
    await r.start("chat", { n: 0 }, { id: "c", subject: "carol", principal: "p1" });
    await until(
      async () =>
        (await r.getState("c~1", { as: "p1" }).catch(() => undefined))?.status === "completed",
    );
    expect((await r.compact("c", { as: "p1", snapshotFirst: true })).removed).toBeGreaterThan(0);
    expect(await r.verifyLog("c~1", { as: "p1" })).toMatchObject({
      ok: true,
      predecessor: { executionId: "c", link: "compacted" },
    });
    await r.eraseSubject("carol");
    const state = await r.getState("c", { as: "p1" });
    expect(state).toMatchObject({ status: "continued", _erased: ["carol"], flow: "chat" });
    // V7: the owner survives the erasure of its start's payload.
    const anonymous = await r.getState("c").catch((e: unknown) => e);
    expect(isLoomError(anonymous, "LOOM_UNAUTHORIZED")).toBe(true);
    expect((await r.eraseSubject("carol")).executions.sort()).toEqual(["c", "c~1"]);
    await r.close();
  });

  it("V8: a message shaped like a sealed value is delivered as sent, and does not block the chain", async () => {
    const two = flow$("two", async (ctx) => ({ a: await ctx.receive(), b: await ctx.receive() }));
    const r = createRuntime({ store: memoryStore(), pollIntervalMs: 20 }).registerFlow(two);
    const h = await r.start("two", null, { id: "t" });
    const forged = { $sealed: { codec: "aes-256-gcm", keyId: "k1", data: "AAAA" } };
    await r.send("t", forged);
    await r.send("t", "hello");
    expect((await h.result()).output).toEqual({ a: forged, b: "hello" });
    await r.close();
  });

  it("a repeat start may not change the execution's data subject", async () => {
    const r = runtime({ store: memoryStore() });
    await (await r.start("steps", { secret: "x" }, { id: "x" })).result();
    const again = await r
      .start("steps", { secret: "x" }, { id: "x", subject: "s" })
      .catch((e: unknown) => e);
    expect(isLoomError(again, "LOOM_EXECUTION_CONFLICT")).toBe(true);
    await r.close();
  });

  it("K3: a log whose sequence 0 was deleted does not verify, whatever its snapshot says", async () => {
    const store = memoryStore();
    const r = runtime({ store, audit: true, snapshotEvery: 1 });
    await (await r.start("steps", { secret: "x" }, { id: "x" })).result();
    expect(await r.verifyLog("x")).toMatchObject({ ok: true });
    // A tamperer removes the start; compaction never removes it (P2).
    await store.compact("x", 0, []);
    expect((await store.read("x", 0, 1))[0]?.seq).toBe(1);
    expect(await r.verifyLog("x")).toMatchObject({ ok: false, firstBadSeq: 0, problem: "missing" });
    await r.close();
  });

  it("an isolated effect keeps its taint guard", async () => {
    const guarded = isolated(shell, {
      module: new URL("./fixtures/taint/effects.ts", import.meta.url).href,
    });
    const f = flow$("iso", async (ctx) => ctx.execute(guarded, { cmd: taint("rm -rf /", "web") }));
    const r = createRuntime({ store: memoryStore() }).registerFlow(f);
    const outcome = await (await r.start("iso", null)).result();
    expect(outcome.status).toBe("failed");
    expect(outcome.error?.code).toBe("LOOM_TAINTED_INPUT");
    await r.close();
  });
});
