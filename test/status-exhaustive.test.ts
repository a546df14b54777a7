/**
 * `ExecutionStatus` is handled exhaustively where Loom branches on it (kernel/events.ts E5): the
 * status facts table, the fold's F7 (which statuses an event recomputes), `outcomeOf`, the
 * CLI's exit codes and the statuses' meanings the dashboard shows (analytics/statuses.ts). A status added to the union without being handled there does not compile.
 *
 * The seed notes that a type-level check cannot run inside vitest, so this one runs tsc: it
 * copies src/ into .tmp/, adds a terminal status `archived` to the union in the copy alone (a
 * terminal one reaches the CLI's exit codes too), and compiles the consumers. The
 * `@ts-expect-error` lines below are checked by `npm run typecheck`.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, expectTypeOf, it } from "vitest";
import { EXECUTION_STATUSES, type ExecutionStatus, type StatusTable } from "../src/index.ts";
import { assertNever } from "../src/kernel/never.ts";
import { spawn } from "./support/processes.ts";
import { slow } from "./support/slowdown.ts";

const root = join(import.meta.dirname, "..");

/** The modules that branch on a status, each of which must name every status. */
const CONSUMERS = [
  "src/kernel/events.ts",
  "src/fold/fold.ts",
  "src/runtime/outcome.ts",
  "src/cli/await-outcome.ts",
  "src/analytics/statuses.ts",
];

/** Runs tsc on the project in `dir`; its exit code and what it printed (paths from `dir`). */
function tsc(dir: string): Promise<{ code: number | null; out: string }> {
  const bin = join(root, "node_modules", "typescript", "bin", "tsc");
  const child = spawn(process.execPath, [bin, "--noEmit", "-p", "tsconfig.json"], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr?.on("data", (b: Buffer) => (out += b.toString()));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
  });
}

describe("ExecutionStatus is handled exhaustively (E5)", () => {
  it("E5: a table keyed by status needs every status, and assertNever takes only what is left of none", () => {
    expectTypeOf<keyof StatusTable<number>>().toEqualTypeOf<ExecutionStatus>();
    // @ts-expect-error a table without an entry for every status does not compile
    const partial: StatusTable<number> = { queued: 0 };
    expect(partial.queued).toBe(0);
    const status = EXECUTION_STATUSES[0] as ExecutionStatus;
    // @ts-expect-error assertNever takes a value of type never: a status not handled is not one
    expect(() => assertNever(status, "status")).toThrow(/unhandled status "queued"/);
  });

  it(
    "E5: with a status added to the union and handled nowhere, every consumer fails to compile",
    async () => {
      const scratch = join(root, ".tmp");
      mkdirSync(scratch, { recursive: true });
      const dir = mkdtempSync(join(scratch, "status-"));
      try {
        cpSync(join(root, "src"), join(dir, "src"), { recursive: true });
        const events = join(dir, "src", "kernel", "events.ts");
        const text = readFileSync(events, "utf8");
        const widened = text.replace(/= "completed" \|/, '= "completed" | "archived" |');
        expect(widened).not.toBe(text);
        writeFileSync(events, widened);
        const config = JSON.parse(readFileSync(join(root, "tsconfig.json"), "utf8")) as {
          compilerOptions: Record<string, unknown>;
        };
        const { paths: _paths, ...compilerOptions } = config.compilerOptions;
        // The project file sits beside the copy of src/ (its node_modules are the repo's).
        writeFileSync(
          join(dir, "tsconfig.json"),
          JSON.stringify({ compilerOptions, files: CONSUMERS }),
        );
        const { code, out } = await tsc(dir);
        const errors = out.split("\n").filter((line) => / error TS\d+:/.test(line));
        expect(code).not.toBe(0);
        const files = [...new Set(errors.map((line) => line.slice(0, line.indexOf("("))))].sort();
        expect(files).toEqual([...CONSUMERS].sort());
        // Each error is the new status meeting a consumer that does not handle it.
        for (const line of errors) expect(line).toMatch(/archived/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    slow(180_000),
  );
});
