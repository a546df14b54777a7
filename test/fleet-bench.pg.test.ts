/**
 * The `fleet` benchmark's instruments (bench/fleet-claim.ts, bench/fleet-cpu.ts): a store filled by
 * SQL reads and runs as one Loom wrote (the claim latency is measured on it), the claim takes only
 * its free runnable executions, and a process's CPU time is read from /proc.
 */
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { claimLatency, claimSizesFlag, fill, templates } from "../bench/fleet-claim.ts";
import { processCpuMs } from "../bench/fleet-cpu.ts";
import { createRuntime } from "../src/index.ts";
import { tables } from "../src/store/postgres/db.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { quick } from "./fixtures/fleet/flows.ts";
import { until } from "./helpers.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

const schemas: string[] = [];
afterAll(() => dropSchema(pgUrl(), ...schemas));

describe("the fleet benchmark's claim store, filled by SQL", () => {
  it("holds executions a fleet member claims and drives as ones Loom wrote", async () => {
    const url = pgUrl();
    const schema = schemaName("fleetfill");
    schemas.push(schema);
    const store = await postgresStore({ connectionString: url, schema });
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await templates(store);
      await fill(db, tables(schema), 1, 400);
      // 1..400: every 100th runnable, 200 and 400 held by another owner, 100 and 300 free.
      const counts = await db.query<{ status: string; n: number }>(
        `SELECT status, count(*)::int AS n FROM "${schema}".executions GROUP BY status`,
      );
      const byStatus = Object.fromEntries(counts.rows.map((r) => [r.status, r.n]));
      expect(byStatus).toEqual({ completed: 397, pending: 2 + 1, running: 2 });
      // The claim's index (leases.ts L4) holds the runnable ones and no other.
      const flags = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".leases l JOIN "${schema}".executions e
         ON e.id = l.execution_id WHERE l.runnable <> (e.status IN ('pending', 'running'))`,
      );
      expect(flags.rows[0]?.n).toBe(0);

      const runtime = createRuntime({ store, closeStore: false, pollIntervalMs: 20 }).registerFlow(
        quick,
      );
      try {
        // The free ones (two filled, the template) are claimed and run to completion from the
        // events the fill copied; the held ones stay with their owner.
        const id = (g: number) =>
          db.query<{ id: string }>(`SELECT 'fill-' || md5($1::text) AS id`, [g]);
        for (const g of [100, 300]) {
          const { rows } = await id(g);
          expect(await runtime.handle(rows[0]?.id ?? "").result()).toEqual({
            status: "completed",
            output: 0 + 1 + 2,
          });
        }
        await until(async () => (await runtime.list({ status: ["pending"] })).length === 0);
        const held = await Promise.all([200, 400].map(async (g) => (await id(g)).rows[0]?.id));
        const running = await runtime.list({ status: ["running"] });
        expect(running.map((x) => x.executionId).sort()).toEqual(held.sort());
      } finally {
        await runtime.close();
      }
    } finally {
      await db.end();
      await store.close();
    }
  });

  it("measures the claim at each size, growing one store", async () => {
    const url = pgUrl();
    const schema = schemaName("fleetclaim");
    schemas.push(schema);
    const figures = await claimLatency(url, schema, [200, 1000], 5);
    expect(figures.map((f) => [f.executions, f.runnable])).toEqual([
      [200, 2],
      [1000, 10],
    ]);
    for (const f of figures) expect(f.p99Ms).toBeGreaterThanOrEqual(f.p50Ms);
  });

  it("parses the claim sizes it is given", () => {
    expect(claimSizesFlag(undefined)).toEqual([10_000, 100_000, 1_000_000]);
    expect(claimSizesFlag("1000,200")).toEqual([200, 1000]);
    expect(claimSizesFlag("none")).toEqual([]);
    expect(() => claimSizesFlag("10,x")).toThrow(/claim-sizes/);
  });
});

describe("the fleet benchmark's CPU accounting", () => {
  it("reads a process's CPU time from /proc, and none for a process that is gone", () => {
    const before = processCpuMs(process.pid);
    let x = 0;
    const t0 = Date.now();
    while (Date.now() - t0 < 100) x += Math.sqrt(x + 1);
    expect(x).toBeGreaterThan(0);
    expect(processCpuMs(process.pid)).toBeGreaterThan(before);
    expect(processCpuMs(2 ** 22 + 1)).toBeNaN();
  });
});
