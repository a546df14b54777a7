/**
 * Forks by origin (issue 25 item 1): a fork's batch records it under its origin (fold
 * index-changes.ts W4, store S21, fork.ts V1), `runtime.forksOf` lists them, authorized as
 * getState is, and the dashboard's lineage shows them (ui/lineage.ts G1, G2). On memory and
 * SQLite here; PostgreSQL in forks-by-origin.pg.test.ts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { flow$, memoryStore, type Store } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { indexChanges } from "../src/fold/index-changes.ts";
import { lineageOf } from "../src/ui/lineage.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();
const dir = mkdtempSync(join(tmpdir(), "loom-forks-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

const stores: [string, () => Store][] = [
  ["memory", () => memoryStore()],
  ["sqlite", () => sqliteStore(join(dir, `forks-${files++}.db`))],
];

/** Three steps, then waits for a resume: forkable at every step. */
const steps = flow$("steps", async (ctx) => {
  const a = await ctx.run("a", () => 1);
  const b = await ctx.run("b", () => a + 1);
  const c = await ctx.run("c", () => b + 1);
  return (await ctx.suspend<number>()) + c;
});

async function parked(id: string, store: Store, principal?: string) {
  const r = rt(store, { closeStore: true }).registerFlow(steps);
  await r.start(steps, null, principal === undefined ? { id } : { id, principal });
  const as = principal === undefined ? {} : { as: principal };
  await until(async () => (await r.getState(id, as)).status === "parked");
  return r;
}

describe("W4: a fork's batch names its origin in its index changes", () => {
  it("only the fork point's envelope does; a copied envelope before it, or any other, does not", () => {
    const at = (seq: number, from?: number) => ({
      executionId: "f",
      seq,
      kind: "STEP_STARTED" as const,
      at: 1,
      payload: null,
      ...(from === undefined ? {} : { meta: { forkedFrom: { executionId: "o", seq: from } } }),
    });
    expect(indexChanges([at(0, 2), at(1, 2), at(2, 2)])?.forkedFrom).toEqual({
      executionId: "o",
      seq: 2,
    });
    expect(indexChanges([at(0, 2), at(1, 2)])).toBeUndefined();
    expect(indexChanges([at(0), at(1)])).toBeUndefined();
  });
});

for (const [name, open] of stores) {
  describe(`runtime.forksOf on ${name} (store S21, fork.ts V1)`, () => {
    it("lists the forks oldest first with their fork points; a fork's own forks are its", async () => {
      const r = await parked("origin", open());
      await r.fork("origin", 3, "late");
      await r.fork("origin", 1, "early");
      await r.fork("early", 0, "early-again");
      expect(await r.forksOf("origin")).toEqual([
        { executionId: "late", seq: 3 },
        { executionId: "early", seq: 1 },
      ]);
      expect(await r.forksOf("origin", { limit: 1 })).toEqual([{ executionId: "late", seq: 3 }]);
      expect(await r.forksOf("early")).toEqual([{ executionId: "early-again", seq: 0 }]);
      expect(await r.forksOf("late")).toEqual([]);
    });

    it("a fork refused (its id taken) adds no row; bad input is refused before any read", async () => {
      const r = await parked("origin", open());
      await r.fork("origin", 2, "f");
      await expect(r.fork("origin", 1, "f")).rejects.toMatchObject({
        code: "LOOM_EXECUTION_CONFLICT",
      });
      expect(await r.forksOf("origin")).toEqual([{ executionId: "f", seq: 2 }]);
      await expect(r.forksOf("origin", { limit: 0 })).rejects.toMatchObject({
        code: "LOOM_INVALID_INPUT",
      });
      await expect(r.forksOf("no-such")).rejects.toMatchObject({ code: "LOOM_NOT_FOUND" });
    });

    it("an owned origin's forks are its owner's to list, as its state is (attacker: another principal)", async () => {
      const r = await parked("owned", open(), "alice");
      await r.fork("owned", 2, "owned-fork", { as: "alice" });
      await expect(r.forksOf("owned", { as: "mallory" })).rejects.toMatchObject({
        code: "LOOM_UNAUTHORIZED",
      });
      expect(await r.forksOf("owned", { as: "alice" })).toEqual([
        { executionId: "owned-fork", seq: 2 },
      ]);
    });

    it("retention that deletes a fork (store S13) removes its row", async () => {
      const r = await parked("origin", open());
      await r.fork("origin", 2, "gone");
      await r.fork("origin", 3, "kept");
      await r.cancel("gone");
      expect(await r.applyRetention({ terminalOlderThanMs: 0, statuses: ["cancelled"] })).toEqual([
        "gone",
      ]);
      expect(await r.forksOf("origin")).toEqual([{ executionId: "kept", seq: 3 }]);
    });

    it("G1, G2: the lineage of an origin lists its forks; a fork's names its origin", async () => {
      const r = await parked("origin", open());
      await r.fork("origin", 2, "f1");
      await r.fork("origin", 1, "f2");
      const origin = await lineageOf(r, await r.getState("origin"));
      // G2
      expect(origin).toEqual({
        forks: [
          { executionId: "f1", seq: 2 },
          { executionId: "f2", seq: 1 },
        ],
      });
      // G1
      const fork = await lineageOf(r, await r.getState("f1"));
      expect(fork).toEqual({ forks: [], forkedFrom: { executionId: "origin", seq: 2 } });
    });
  });
}
