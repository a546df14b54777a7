/**
 * The structure rules of `npm run verify` (issue 24) can fail: an import circle is found by
 * scripts/check-structure.mjs, and ESLint's size rules refuse a file over 400 lines and a
 * function over 80 lines in src/, as eslint.config.js applies them.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ESLint, type Linter } from "eslint";
import tseslint from "typescript-eslint";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const script = fileURLToPath(new URL("../scripts/check-structure.mjs", import.meta.url));
const markers = fileURLToPath(new URL("../scripts/check-markers.mjs", import.meta.url));
const circle = fileURLToPath(new URL("./fixtures/structure/circle", import.meta.url));
/** The size rules as eslint.config.js applies them to src/. */
const sizeRules = JSON.parse(
  readFileSync(new URL("../eslint.sizes.json", import.meta.url), "utf8"),
) as Linter.RulesRecord;

describe("the structure check (issue 24)", () => {
  it("names the files of an import circle and exits 1; src/ has none", () => {
    const found = spawnSync(process.execPath, [script, circle], { encoding: "utf8" });
    expect(found.status).toBe(1);
    expect(found.stderr).toBe("import circle of 2 files: a.ts, b.ts\n");
    const src = execFileSync(process.execPath, [script, "src"], { cwd: root, encoding: "utf8" });
    expect(src).toBe("structure: no import circle in src\n");
  });

  it("names each merge conflict marker, also one the formatter quoted, and exits 1; the repo has none", () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-markers-"));
    try {
      writeFileSync(
        join(dir, "a.ts"),
        "/**\n<<<<<<< HEAD\n * one\n=======\n * two\n>>>>>>> b\n */\n",
      );
      writeFileSync(join(dir, "b.md"), "Title\n=======\n\n> > > > > > > wt-queues\n");
      const found = spawnSync(process.execPath, [markers, dir], { encoding: "utf8" });
      expect(found.status).toBe(1);
      expect(found.stderr).toBe(
        "conflict marker at a.ts:2\nconflict marker at a.ts:6\nconflict marker at b.md:4\n",
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const repo = execFileSync(process.execPath, [markers], { cwd: root, encoding: "utf8" });
    expect(repo).toMatch(/^structure: no conflict marker in \d+ files\n$/);
  });

  const lint = (code: string) =>
    new ESLint({
      cwd: root,
      overrideConfigFile: true,
      overrideConfig: [
        {
          files: ["**/*.ts"],
          languageOptions: { parser: tseslint.parser },
          rules: sizeRules,
        },
      ],
    }).lintText(code, { filePath: "src/fixture.ts" });

  it("refuses a function over 80 lines and a file over 400, and passes one just under", async () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`);
    const fn = (name: string, n: number) => [`export function ${name}() {`, ...body(n), "}"];
    const [long] = await lint(fn("f", 79).join("\n"));
    expect(long?.messages.map((m) => m.ruleId)).toEqual(["max-lines-per-function"]);
    const [fits] = await lint(fn("f", 78).join("\n"));
    expect(fits?.messages).toEqual([]);
    const many = Array.from({ length: 6 }, (_, i) => fn(`f${i}`, 70)).flat();
    const [big] = await lint(many.join("\n"));
    expect(big?.messages.map((m) => m.ruleId)).toEqual(["max-lines"]);
  });

  it("applies the size rules to every file of src/", async () => {
    const eslint = new ESLint({ cwd: root });
    for (const file of ["src/runtime/run.ts", "src/store/spi.ts", "src/kernel/json.ts"]) {
      const config = (await eslint.calculateConfigForFile(file)) as {
        rules: Record<string, unknown>;
      };
      expect(config.rules["max-lines"]).toEqual([2, { max: 400 }]);
      expect(config.rules["max-lines-per-function"]).toEqual([
        2,
        { max: 80, skipBlankLines: true, skipComments: true },
      ]);
    }
  });
});
