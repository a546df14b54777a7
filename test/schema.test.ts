/**
 * Issue 19's Standard Schema input checks (test/support/schema-suite.ts) on the memory store and
 * on SQLite; test/schema.pg.test.ts runs the same suite on PostgreSQL.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { memoryStore } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { schemaSuite } from "./support/schema-suite.ts";
import { FLOWS, loom, oneErrorLine, tempDirs } from "./fixtures/cli/spawn.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-schema-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

schemaSuite({ name: "the memory store", open: async () => memoryStore() });
schemaSuite({ name: "SQLite", open: async () => sqliteStore(join(dir, `s${++n}.db`)) });

describe("loom run --input checks the flow's schema (issue 19)", () => {
  const temp = tempDirs("loom-schema-cli-");
  it("refuses a bad input with the schema's issues, exit 1, and records nothing", async () => {
    const cwd = temp();
    const refused = await loom(cwd, "run", FLOWS, "checked", "--input", '{"name":5}', "--id", "c1");
    expect(refused.code).toBe(1);
    expect(oneErrorLine(refused)).toMatch(/the input of flow "checked" fails its schema: name: /);
    const ls = await loom(cwd, "ls", "--json");
    expect(ls.code).toBe(0);
    expect(ls.stdout).not.toContain("c1");
    const ok = await loom(cwd, "run", FLOWS, "checked", "--input", '{"name":"ada"}', "--id", "c1");
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain("hi ada");
  });
});
