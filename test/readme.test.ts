import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { slow } from "./support/slowdown.ts";

const root = join(import.meta.dirname, "..");
/** tsx by URL: the example runs with a working directory outside the repository. */
const tsxLoader = import.meta.resolve("tsx");

describe("README", () => {
  it("its example runs as written and completes", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const code = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(code).toBeDefined();
    expect((code ?? "").trim().split("\n").length).toBeLessThanOrEqual(20);
    const scratch = join(root, ".tmp");
    mkdirSync(scratch, { recursive: true });
    const file = join(scratch, `readme-${process.pid}.ts`);
    writeFileSync(file, code ?? "");
    const cwd = mkdtempSync(join(tmpdir(), "loom-readme-"));
    try {
      const run = spawnSync(process.execPath, ["--import", tsxLoader, file], {
        cwd,
        encoding: "utf8",
        timeout: slow(30_000),
      });
      expect(run.stderr).toBe("");
      expect(run.stdout).toContain("status: 'completed'");
      expect(run.stdout).toContain("tides physics: 3 sources");
    } finally {
      rmSync(file, { force: true });
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
