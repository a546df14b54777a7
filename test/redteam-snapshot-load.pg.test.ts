/**
 * test/redteam-snapshot-load.test.ts's F5 attack on PostgreSQL: a conversation of every kind of
 * call, read back on every turn (cache `maxExecutions: 0`, runtime/load-state.ts L2, L3), and a
 * snapshot on nearly every batch: each one equals the fold of the log through its sequence, and
 * snapshot plus tail equals the whole fold, for every generation, the fork and the restore.
 */
import { afterAll, describe, expect, it } from "vitest";
import { postgresStore } from "../src/store/postgres/index.ts";
import type { Store } from "../src/index.ts";
import { expectReplayEquality, runtimes } from "./helpers.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import {
  expectShotsFold,
  kid,
  mix,
  recording,
  resetTurns,
  turns,
} from "./support/snapshot-load.ts";

const rt = runtimes();
const schemas: string[] = [];
const stores: Store[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
  await dropSchema(pgUrl(), ...schemas);
});

describe("F5 for runs read back on every turn, on PostgreSQL", () => {
  it("every snapshot of a mixed uncached conversation folds", async () => {
    resetTurns();
    const schema = schemaName("snapload");
    schemas.push(schema);
    const pg = await postgresStore({ connectionString: pgUrl(), schema });
    stores.push(pg);
    const { store, shots } = recording(pg);
    const errors: Error[] = [];
    const r = rt(store, {
      snapshotEvery: 1,
      cache: { maxExecutions: 0 },
      features: { continueAsNew: true },
      onError: (e) => errors.push(e),
    })
      .registerFlow(mix)
      .registerFlow(kid);
    await r.start(mix, null, { id: "m" });
    await turns(r, "m", 0, 10);
    const head = await r.followToHead("m");
    await r.fork(head, await store.head(head), "f");
    await r.restoreFromState(head, mix, await r.getState(head));
    await turns(r, "m", 10, 12);
    expect(shots.length).toBeGreaterThan(20);
    await expectShotsFold(store, shots);
    for (const x of await r.list()) await expectReplayEquality(r, x.executionId);
    expect(errors.map((e) => e.message)).toEqual([]);
  });
});
