/**
 * The `loom` command on PostgreSQL (issue 9): `loom worker --pg URL --pg-schema NAME` is a fleet
 * member that claims what a client recorded, and the reading commands read the same schema.
 */
import { spawn } from "./support/processes.ts";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createRuntime } from "../src/index.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { quick } from "./fixtures/fleet/flows.ts";
import { until } from "./helpers.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

const BIN = fileURLToPath(new URL("../bin/loom.js", import.meta.url));
const FLOWS = fileURLToPath(new URL("./fixtures/fleet/flows.ts", import.meta.url));

function loom(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args]);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, stdout, stderr })));
}

describe("loom on PostgreSQL", () => {
  it("loom worker --pg claims what a client recorded; loom ls and show read it; --db with --pg is a usage error", async () => {
    const url = pgUrl();
    const schema = schemaName("cli");
    const where = ["--pg", url, "--pg-schema", schema];
    const store = await postgresStore({ connectionString: url, schema });
    const client = createRuntime({ store, background: false, closeStore: false }).registerFlow(
      quick,
    );
    const worker = spawn(process.execPath, [BIN, "worker", FLOWS, ...where]);
    let log = "";
    worker.stderr.on("data", (b: Buffer) => (log += b.toString()));
    try {
      for (let i = 0; i < 5; i++) {
        await client.start(quick, { steps: 3 }, { id: `cli-${i}`, drive: false });
      }
      await until(async () => (await client.list({ status: ["completed"] })).length === 5, 30_000);
      expect(log).toContain(`postgres schema ${schema}`);
      const ls = await loom(["ls", ...where, "--status", "completed", "--json"]);
      expect(ls.code).toBe(0);
      const listed = (JSON.parse(ls.stdout) as { executionId: string }[]).map((x) => x.executionId);
      expect(listed.sort()).toEqual(["cli-0", "cli-1", "cli-2", "cli-3", "cli-4"]);
      const show = await loom(["show", "cli-3", ...where, "--json"]);
      expect(show.code).toBe(0);
      expect(show.stdout).toContain('"completed"');
      const both = await loom(["ls", "--db", "x.db", ...where]);
      expect(both.code).toBe(2);
      expect(both.stderr).toContain("--db and --pg");
      const exited = new Promise((resolve) => worker.on("exit", resolve));
      worker.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      worker.kill("SIGKILL");
      await client.close();
      await store.close();
      await dropSchema(url, schema);
    }
  });
});
