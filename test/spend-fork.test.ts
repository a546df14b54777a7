/**
 * Issue 20 item 8: a fork starts from what its copied prefix spent, and `fork(..., { budget })`
 * gives it a budget of its own that may only narrow its origin's (runtime/fork.ts V6, fold
 * F11, kernel/resources.ts Q5). Each test is written as the way around it: a fork that would
 * spend past its own budget, a fork budget that would lift its origin's, a forged stamp, a
 * restart, the command line.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  createRuntime,
  flow$,
  foldAll,
  InvalidInputError,
  memoryStore,
  type Envelope,
  type Json,
  type Runtime,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { parseCommand } from "../src/cli/args.ts";
import { counts } from "./fixtures/cli/flows.ts";
import { loom, oneErrorLine, showJson, tempDirs } from "./fixtures/cli/spawn.ts";
import { runtimes } from "./helpers.ts";
import { paidTool, refusedOr } from "./support/spend.ts";

const COST = 400;
const rt = runtimes();
const tempDir = tempDirs("loom-spend-fork-");

/** The shared paid tool (test/support/spend.ts), at COST tokens a call. */
const paid = () => paidTool({ cost: COST, holdMs: 0 });

/** Four paid calls in a row, a refusal kept as "refused"; first a negotiation when asked. */
function spender(effect: ReturnType<typeof paidTool>["effect"], negotiate = 0) {
  return flow$("spender", async (ctx) => {
    if (negotiate > 0) await ctx.negotiateBudget("tokens", negotiate, { ceiling: negotiate });
    const out: (number | string)[] = [];
    for (let i = 0; i < 4; i++) {
      out.push(await ctx.execute(effect, null, { retry: false }).catch(refusedOr));
    }
    return out;
  });
}

/** The sequence by which `n` paid calls have settled and been metered. */
function afterCalls(log: Envelope[], n: number): number {
  const nth = (kind: string) => log.filter((e) => e.kind === kind)[n - 1]?.seq ?? -1;
  return Math.max(nth("STEP_COMPLETED"), nth("RESOURCE_METERED"));
}

async function spentTokens(r: Runtime, id: string): Promise<number> {
  const tokens = (await r.getState(id))._resources?.tokens;
  return (tokens?.input ?? 0) + (tokens?.output ?? 0);
}

/** A copy of `log` whose envelope `at` alone carries `meta.forkBudget: stamp`. */
function stampedAt(log: Envelope[], at: number, stamp: Json): Envelope[] {
  return log.map((e, i) => {
    const meta: NonNullable<Envelope["meta"]> = { ...e.meta };
    delete meta.forkBudget;
    if (i === at) meta.forkBudget = stamp;
    return { ...e, meta };
  });
}

const quotaFacts = async (r: Runtime, id: string) =>
  (await r.readLog(id)).filter((e) => e.kind === "QUOTA_EXCEEDED").length;

describe("a fork's spend (issue 20 item 8, fork.ts V6)", () => {
  it("V6: a fork's own budget counts what its prefix spent, and refuses where its origin's would still allow", async () => {
    const { effect, spent } = paid();
    const f = spender(effect);
    const r = rt(memoryStore());
    const origin = await r.start(f, undefined, { id: "o", budget: { tokens: 5000 } });
    expect((await origin.result()).output).toEqual([COST, COST, COST, COST]);
    const at = afterCalls(await r.readLog("o"), 2);

    // Without a budget of its own a fork runs under its origin's, which allows the calls.
    const free = await r.fork("o", at, "o-free");
    expect((await free.result()).output).toEqual([COST, COST, COST, COST]);

    // 800 copied + 400 = 1200: the third call fits; the fourth would pass the fork's budget.
    const before = spent.real;
    const capped = await r.fork("o", at, "o-capped", { budget: { tokens: 1200 } });
    expect((await capped.result()).output).toEqual([COST, COST, COST, "refused"]);
    expect(spent.real - before).toBe(COST);
    expect(await spentTokens(r, "o-capped")).toBe(1200);
    expect(await quotaFacts(r, "o-capped")).toBe(1);
    expect((await r.getState("o-capped"))._budget).toEqual({ tokens: 1200 });
    expect((await r.getState("o-capped"))._quotaExceeded).toEqual({
      dimension: "tokens",
      budget: "execution",
    });
  });

  it("F11: the fork's budget holds over a grant its prefix negotiated (the stamp is applied at the fork point)", async () => {
    const { effect } = paid();
    const f = spender(effect, 3000);
    const r = rt(memoryStore(), { negotiation: { tokens: { ceiling: 10_000 } } });
    await (await r.start(f, undefined, { id: "n", budget: { tokens: 100 } })).result();
    expect((await r.getState("n"))._budget).toEqual({ tokens: 3000 });
    const at = afterCalls(await r.readLog("n"), 2);
    // 1,000 is above the start's 100 but under the 3,000 the origin had at the fork point.
    const fork = await r.fork("n", at, "n-fork", { budget: { tokens: 1000 } });
    expect((await fork.result()).output).toEqual([COST, COST, "refused", "refused"]);
    expect((await r.getState("n-fork"))._budget).toEqual({ tokens: 1000 });
    await expect(r.fork("n", at, "n-more", { budget: { tokens: 3001 } })).rejects.toThrow(
      /raises tokens to 3001: "n" limits tokens to 3000/,
    );
  });

  it("V6 attack: a fork budget that raises, leaves out or misspells a limit is refused, and nothing is written", async () => {
    const { effect } = paid();
    const f = spender(effect);
    const r = rt(memoryStore());
    await (
      await r.start(f, undefined, { id: "b", budget: { tokens: 5000, custom: { calls: 10 } } })
    ).result();
    const refused: [unknown, RegExp][] = [
      [{ tokens: 6000, custom: { calls: 10 } }, /raises tokens to 6000/],
      [{ tokens: 5000, custom: { calls: 11 } }, /raises custom\.calls to 11/],
      [{ tokens: 1000 }, /leaves out custom\.calls/],
      [{ custom: { calls: 1 } }, /leaves out tokens/],
      [{ token: 100, tokens: 100, custom: { calls: 1 } }, /unknown dimension "token"/],
      [{ tokens: -1, custom: { calls: 1 } }, /finite numbers >= 0/],
      [{ tokens: Infinity, custom: { calls: 1 } }, /finite numbers >= 0/],
      [[1000], /must be an object/],
    ];
    for (const [budget, message] of refused) {
      const attempt = r.fork("b", 3, "b-fork", { budget: budget as { tokens: number } });
      const e = await attempt.catch((x: unknown) => x);
      expect(e, JSON.stringify(budget)).toBeInstanceOf(InvalidInputError);
      expect((e as Error).message).toMatch(message);
      expect(await r.store.head("b-fork")).toBe(-1);
    }
    await expect(r.getState("b-fork")).rejects.toMatchObject({ code: "LOOM_NOT_FOUND" });
    // As tight, tighter, and a dimension the origin does not limit added: all allowed.
    const budget = { tokens: 5000, custom: { calls: 2 }, costUsd: 1 };
    await (await r.fork("b", 3, "b-fork", { budget })).result();
    expect((await r.getState("b-fork"))._budget).toEqual(budget);
  });

  it("F11 attack: a forged stamp in a log cannot lift a limit, and one off the fork point is ignored", async () => {
    const { effect } = paid();
    const r = rt(memoryStore());
    await (
      await r.start(spender(effect), undefined, { id: "g", budget: { tokens: 900 } })
    ).result();
    await r.fork("g", 2, "g-fork", { budget: { tokens: 800 } });
    const log = (await r.readLog("g-fork")).slice(0, 3);
    expect(log.map((e) => e.meta?.forkBudget)).toEqual([undefined, undefined, { tokens: 800 }]);
    // Raised, dropped: the origin's 900 stays; a dimension added is added.
    expect(foldAll(stampedAt(log, 2, { tokens: 1e9 }))._budget).toEqual({ tokens: 900 });
    expect(foldAll(stampedAt(log, 2, {}))._budget).toEqual({ tokens: 900 });
    expect(foldAll(stampedAt(log, 2, { tokens: 1e9, ms: 5 }))._budget).toEqual({
      tokens: 900,
      ms: 5,
    });
    // Off the fork point, or unreadable: ignored.
    expect(foldAll(stampedAt(log, 1, { tokens: 1 }))._budget).toEqual({ tokens: 900 });
    expect(foldAll(stampedAt(log, 2, { tokens: "1" }))._budget).toEqual({ tokens: 900 });
    // On the origin's own log (no forkedFrom): ignored.
    const own = (await r.readLog("g")).slice(0, 3);
    expect(foldAll(stampedAt(own, 2, { tokens: 1 }))._budget).toEqual({ tokens: 900 });
  });

  it("V6: the fork's budget is durable: a new runtime over the same SQLite file sees it and still refuses", async () => {
    const db = join(tempDir(), "loom.db");
    const { effect, spent } = paid();
    const f = spender(effect);
    const first = createRuntime({ store: sqliteStore(db), background: false });
    await (await first.start(f, undefined, { id: "d", budget: { tokens: 5000 } })).result();
    await first.close();
    // A process without the flow only records the fork (like `loom fork` without --module).
    const recorder = createRuntime({ store: sqliteStore(db), background: false });
    const at = afterCalls(await recorder.readLog("d"), 2);
    await recorder.fork("d", at, "d-fork", { budget: { tokens: 1000 } });
    await recorder.close();

    const later = createRuntime({ store: sqliteStore(db), background: false });
    try {
      later.registerFlow(f);
      const state = await later.getState("d-fork");
      expect(state._budget).toEqual({ tokens: 1000 });
      expect(await spentTokens(later, "d-fork")).toBe(800); // 200 left
      const before = spent.real;
      expect(await later.recoverAbandoned()).toEqual(["d-fork"]);
      expect((await later.handle("d-fork").result()).output).toEqual([
        COST,
        COST,
        "refused",
        "refused",
      ]);
      expect(spent.real).toBe(before);
      expect(await quotaFacts(later, "d-fork")).toBe(2);
    } finally {
      await later.close();
    }
  });
});

describe("loom fork --budget", () => {
  it("gives the copy a budget of its own; one that raises or misspells a limit writes nothing", async () => {
    const cwd = tempDir();
    const setup = createRuntime({ store: sqliteStore(join(cwd, "loom.db")), background: false });
    await (await setup.start(counts, 10, { id: "c-1", budget: { tokens: 50 } })).result();
    await setup.close();

    const [narrowed, raised, misspelled, badJson] = await Promise.all([
      loom(cwd, "fork", "c-1", "2", "--id", "c-1-b", "--budget", '{"tokens":20,"wallMs":9000}'),
      loom(cwd, "fork", "c-1", "2", "--id", "c-1-r", "--budget", '{"tokens":100}'),
      loom(cwd, "fork", "c-1", "2", "--id", "c-1-m", "--budget", '{"token":10}'),
      loom(cwd, "fork", "c-1", "2", "--id", "c-1-j", "--budget", "{bad"),
    ]);
    expect(narrowed).toMatchObject({ code: 0, stdout: "c-1-b\n" });
    const { state } = await showJson(cwd, "c-1-b");
    expect((state as { _budget?: unknown })._budget).toEqual({ tokens: 20, wallMs: 9000 });
    expect(raised.code).toBe(1);
    expect(oneErrorLine(raised)).toMatch(
      /^loom: LOOM_INVALID_INPUT the budget of fork "c-1-r" raises tokens to 100: "c-1" limits tokens to 50/,
    );
    expect(misspelled.code).toBe(1);
    expect(oneErrorLine(misspelled)).toMatch(
      /^loom: LOOM_INVALID_INPUT .*unknown dimension "token"/,
    );
    expect(badJson.code).toBe(2);
    expect(oneErrorLine(badJson)).toMatch(/^loom: --budget is not valid JSON/);
    const shown = await Promise.all(["c-1-r", "c-1-m", "c-1-j"].map((id) => loom(cwd, "show", id)));
    for (const s of shown) expect(oneErrorLine(s)).toMatch(/^loom: LOOM_NOT_FOUND /);
  });

  it("parses --budget as JSON, and only for fork", () => {
    expect(parseCommand(["fork", "a-1", "3", "--budget", '{"tokens":5}'])).toMatchObject({
      name: "fork",
      budget: { tokens: 5 },
    });
    expect(() => parseCommand(["run", "m.ts", "f", "--budget", "{}"])).toThrow(
      /does not take --budget/,
    );
  });
});
