/**
 * Issue 20, crashed attempts (effect-call C1, step machinery C2, fold S3): an attempt that
 * started under a budget and never settled is charged its reservation when its run is recovered.
 * The invariant hunted: what the provider billed (every request billed in full, as a provider
 * that keeps generating after its client died) is at most the budget plus one reservation, what
 * the log records is at most what was billed, and the refusal leaves a QUOTA_EXCEEDED fact.
 */
import type { ChildProcess } from "node:child_process";
import { ownerProcess } from "./support/processes.ts";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, flow$, step$, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { fakeAnthropic, type FakeAnthropic } from "../src/testing/index.ts";
import { expectReplayEquality, until } from "./helpers.ts";

const CHILD = join(import.meta.dirname, "support", "spend-crash-child.ts");
const children = new Set<ChildProcess>();
const open: Runtime[] = [];
const servers: FakeAnthropic[] = [];
afterEach(async () => {
  for (const c of children) c.kill("SIGKILL");
  children.clear();
  await Promise.all(open.splice(0).map((r) => r.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

function owner(db: string, baseURL: string, mode: "start" | "recover") {
  return ownerProcess(CHILD, [db, baseURL, mode], children);
}

describe("crashed attempts are charged (issue 20)", () => {
  it("SIGKILL of the owner mid-stream, again and again: each killed attempt is charged its reservation, and the budget refuses once spent", async () => {
    // 40 characters of prompt (10 tokens) and maxTokens 300: a reservation of 310 tokens. The
    // answer is 300 tokens, streamed slowly enough to be killed in the middle.
    const fake = await fakeAnthropic({
      text: "z".repeat(1200),
      deltaChars: 100,
      deltaMs: 150,
      inputTokens: 10,
    });
    servers.push(fake);
    const db = join(mkdtempSync(join(tmpdir(), "loom-spend-crash-")), "loom.db");
    const budget = 1000;
    const reservation = 310;
    let kills = 0;
    let outcome: { status?: string; output?: unknown } | undefined;
    for (let round = 0; round < 6 && outcome === undefined; round++) {
      const asked = fake.requests.length;
      const o = owner(db, fake.baseURL, round === 0 ? "start" : "recover");
      // Kill it once its stream is under way; or it ends (refused) without asking.
      await until(() => o.exited() || (fake.requests[asked]?.deltasSent ?? 0) >= 1, 30_000);
      if (!o.exited()) {
        o.p.kill("SIGKILL");
        kills++;
      }
      await o.exit;
      const line = o.out().trim();
      if (line !== "") outcome = JSON.parse(line) as typeof outcome;
    }
    // Billed in full for every request the provider saw.
    const billed = fake.requests.length * (10 + 300);
    expect(kills).toBe(3);
    expect(fake.requests).toHaveLength(3);
    expect(outcome).toEqual({ status: "completed", output: { refused: "LOOM_QUOTA_EXCEEDED" } });
    expect(billed).toBeLessThanOrEqual(budget + reservation);

    const r = createRuntime({ store: sqliteStore(db), background: false });
    open.push(r);
    const log = await r.readLog("spend-1");
    const charges = log.filter(
      (e) =>
        e.kind === "RESOURCE_METERED" &&
        (e.payload as { estimated?: unknown }).estimated === "crashed-attempt",
    );
    expect(charges).toHaveLength(3);
    const state = await r.getState("spend-1");
    const tokens = (state._resources?.tokens?.input ?? 0) + (state._resources?.tokens?.output ?? 0);
    expect(tokens).toBe(3 * reservation);
    expect(tokens).toBeLessThanOrEqual(billed);
    expect(log.filter((e) => e.kind === "QUOTA_EXCEEDED")).toHaveLength(1);
    await expectReplayEquality(r, "spend-1");
  });

  it("a run stopped mid-attempt is charged once on recovery, against its nested budget too, and not again when recovered twice", async () => {
    const db = join(mkdtempSync(join(tmpdir(), "loom-spend-stop-")), "loom.db");
    let runs = 0;
    const hang = {
      ...step$("hang", async (_: null, ectx) => {
        runs++;
        if (runs <= 2)
          await new Promise((_, reject) => ectx.signal.addEventListener("abort", reject));
        ectx.meter({ tokens: { output: 5 } });
        return "done";
      }),
      reserve: () => ({ tokens: { output: 100 } }),
    };
    const f = flow$("stopped", async (ctx) =>
      ctx.nestedBudget("inner", { tokens: 1000 }, (c) => c.execute(hang, null, { retry: false })),
    );
    const make = () => {
      const r = createRuntime({ store: sqliteStore(db), background: false, leaseTtlMs: 50 });
      r.registerFlow(f);
      return r;
    };
    for (let round = 0; round < 2; round++) {
      const r = make();
      if (round === 0) await r.start(f, undefined, { id: "st", budget: { tokens: 10_000 } });
      else await r.recoverAbandoned();
      await until(() => runs > round, 30_000);
      await r.close();
    }
    const r = make();
    open.push(r);
    await r.recoverAbandoned();
    expect((await r.waitForCompletion("st")).output).toBe("done");
    const state = await r.getState("st");
    // Two stopped attempts charged 100 each, the third metered 5.
    expect(state._resources?.tokens?.output).toBe(205);
    expect(state._scopeResources?.inner?.tokens?.output).toBe(205);
    const log = await r.readLog("st");
    const starts = log.filter((e) => e.kind === "STEP_STARTED");
    expect(starts).toHaveLength(3);
    for (const s of starts)
      expect((s.payload as { reserved?: unknown }).reserved).toEqual({
        delta: { tokens: { output: 100 } },
        budgets: ["inner"],
      });
    await expectReplayEquality(r, "st");
  });

  it("a call cancelled from another process is charged its reservation, against its nested budget too", async () => {
    const db = join(mkdtempSync(join(tmpdir(), "loom-spend-cancel-")), "loom.db");
    let started = false;
    const hang = {
      ...step$("hang", async (_: null, ectx) => {
        started = true;
        await new Promise((_, reject) => ectx.signal.addEventListener("abort", reject));
      }),
      reserve: () => ({ tokens: { output: 300 } }),
    };
    const f = flow$("cancelled", async (ctx) =>
      ctx.nestedBudget("inner", { tokens: 1000 }, (c) => c.execute(hang, null, { retry: false })),
    );
    const ownerRt = createRuntime({ store: sqliteStore(db), background: false });
    const other = createRuntime({ store: sqliteStore(db), background: false });
    open.push(ownerRt, other);
    ownerRt.registerFlow(f);
    await ownerRt.start(f, undefined, { id: "cx", budget: { tokens: 5000 } });
    await until(() => started, 30_000);
    await other.cancel("cx", "enough");
    const state = await other.getState("cx");
    expect(state.status).toBe("cancelled");
    expect(state._resources?.tokens?.output).toBe(300);
    expect(state._scopeResources?.inner?.tokens?.output).toBe(300);
  });

  it("a body that ends with admitted calls running is charged their reservations before its end, so its parent cannot grant that budget again", async () => {
    let real = 0;
    const billed = {
      ...step$("billed-at-send", async (_: null, ectx) => {
        real += 300; // the provider bills when the request is sent
        await new Promise((resolve, reject) => {
          const t = setTimeout(resolve, 2_000);
          ectx.signal.addEventListener("abort", () => {
            clearTimeout(t);
            reject(new Error("aborted"));
          });
        });
        ectx.meter({ tokens: { output: 300 } });
      }),
      reserve: () => ({ tokens: { output: 300 } }),
    };
    const leaver = flow$("leaver", async (ctx) => {
      let running = 0;
      void ctx
        .parallel(
          [0, 1, 2].map(() => async (c: typeof ctx) => {
            const call = c.execute(billed, null, { retry: false });
            running++;
            return call;
          }),
        )
        .catch(() => undefined);
      // Not a syscall: the body ends while its calls run (as a body that forgets to await does).
      const before = real;
      await until(() => running === 3, 30_000);
      await until(() => real > before, 1_000).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 20));
      return "left";
    });
    const parent = flow$("respawner", async (ctx) => {
      const outs: unknown[] = [];
      for (let i = 0; i < 3; i++) {
        outs.push(await ctx.awaitChild(await ctx.spawn(leaver, undefined, { key: `k${i}` })));
      }
      return outs;
    });
    const db = join(mkdtempSync(join(tmpdir(), "loom-spend-end-")), "loom.db");
    const r = createRuntime({ store: sqliteStore(db) });
    open.push(r);
    r.registerFlow(leaver);
    const out = await (
      await r.start(parent, undefined, { id: "rs", budget: { tokens: 1000 } })
    ).result();
    expect(out.status).toBe("completed");
    const state = await r.getState("rs");
    const recordedTokens = state._resources?.tokens?.output ?? 0;
    expect(real).toBeLessThanOrEqual(1000 + 300);
    expect(recordedTokens).toBeGreaterThanOrEqual(real);
  });
});
