/**
 * Issue 9: `runtime.cancel(id)` from any fleet member fences the owner's lease, appends
 * EXECUTION_CANCELLED, and wakes the owner (its notice, sent with LISTEN/NOTIFY: store S18,
 * runtime/fleet.ts L3) to abort its in-flight effect at once. The owner here polls for notices
 * only once a minute, so an abort sooner than that is the wake's.
 */
import { spawn } from "./support/processes.ts";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { createRuntime } from "../src/index.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { expectReplayEquality, until } from "./helpers.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

describe("cancel across processes on PostgreSQL (issue 9)", () => {
  it("a 10-minute effect in another process is cancelled through the store's wake, before its minute-long poll; the log ends EXECUTION_CANCELLED and replays", async () => {
    const url = pgUrl();
    const schema = schemaName("cancel");
    const store = await postgresStore({ connectionString: url, schema });
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        join(import.meta.dirname, "support", "cancel-child.ts"),
        "pg",
        url,
        schema,
        "pg-1",
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const events: { event: string; at: number }[] = [];
    createInterface({ input: child.stdout }).on("line", (line) =>
      events.push(JSON.parse(line) as { event: string; at: number }),
    );
    const r = createRuntime({ store, background: false, closeStore: false });
    try {
      await until(() => events.some((e) => e.event === "started"), 30_000);
      await until(async () => (await r.readLog("pg-1")).some((e) => e.kind === "STEP_STARTED"));
      const t0 = performance.timeOrigin + performance.now();
      expect(await r.cancel("pg-1", "from another member")).toBe(true);
      await until(() => events.some((e) => e.event === "aborted"), 5000);
      const abortedAt = events.find((e) => e.event === "aborted")?.at ?? Infinity;
      // Before the owner's once-a-minute notice poll: the wake aborted it (a latency figure is a
      // bench's job).
      expect(abortedAt - t0).toBeLessThan(60_000);
      const log = await r.readLog("pg-1");
      expect(log.map((e) => e.kind).slice(-2)).toEqual(["STEP_CANCELLED", "EXECUTION_CANCELLED"]);
      await expectReplayEquality(r, "pg-1");
      process.stderr.write(
        `cancel on postgres: aborted ${Math.round(abortedAt - t0)} ms after the cancel\n`,
      );
    } finally {
      child.kill("SIGTERM");
      await r.close();
      await store.close();
      await dropSchema(url, schema);
    }
  });
});
