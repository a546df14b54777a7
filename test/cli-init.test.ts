/**
 * `loom init [dir]`: the command line through `main` (argument parsing, dispatch, the command,
 * errors turned into one line and an exit code), in process with an Io that captures its output,
 * writing project scaffolds into temp folders. I1 and I2 are src/cli/commands/init.ts's.
 *
 * In process rather than through bin/loom.js in a child: bin/loom.js runs the CLI built into
 * dist/, which may be older than the sources beside this test.
 *
 * Whether the scaffold builds and runs against the packed package is the package smoke test's
 * job; here: what is written, and what is refused.
 */
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseCommand } from "../src/cli/args.ts";
import { UsageError } from "../src/cli/cli-error.ts";
import { main } from "../src/cli/main.ts";
import { oneErrorLine, tempDirs, type Result } from "./fixtures/cli/spawn.ts";

const tempDir = tempDirs("loom-cli-init-");

type Manifest = {
  version: string;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
};
const LOOM = JSON.parse(
  readFileSync(new URL("../package.json", import.meta.url), "utf8"),
) as Manifest;

const FILES = [
  ".gitignore",
  "README.md",
  "package.json",
  "src/flows.ts",
  "src/main.ts",
  "tsconfig.json",
];

/** Every entry under `dir` (by relative path): a file's text and mtime, or a folder's mark. */
function snapshot(dir: string): Record<string, string> {
  const seen: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, encoding: "utf8" }).sort()) {
    const path = join(dir, entry);
    const stat = statSync(path, { throwIfNoEntry: false });
    seen[entry] =
      stat === undefined
        ? "(dangling link)"
        : stat.isDirectory()
          ? "(folder)"
          : `${stat.mtimeMs} ${readFileSync(path, "utf8")}`;
  }
  return seen;
}

const filesIn = (dir: string): string[] =>
  Object.entries(snapshot(dir))
    .filter(([, what]) => what !== "(folder)")
    .map(([path]) => path)
    .sort();

/** `loom <args>` run in `cwd`, as bin/loom.js would run it, with its output captured. */
async function loom(cwd: string, ...args: string[]): Promise<Result> {
  let stdout = "";
  let stderr = "";
  const io = {
    out: (text: string) => void (stdout += `${text}\n`),
    err: (text: string) => void (stderr += `${text}\n`),
    cwd,
    debug: false,
  };
  const code = await main(args, io);
  return { code, stdout, stderr };
}

const read = (dir: string, path: string): string => readFileSync(join(dir, path), "utf8");

describe("loom init", () => {
  it("writes the project into a new folder, named after it, and says how to run it", async () => {
    const cwd = tempDir();
    const r = await loom(cwd, "init", "My Project!");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      [
        "wrote a Loom project in 'My Project!':",
        "  package.json",
        "  tsconfig.json",
        "  src/flows.ts",
        "  src/main.ts",
        "  README.md",
        "  .gitignore",
        "",
        "build and run it:",
        "  cd 'My Project!' && npm install",
        "  npm start",
        "",
        "to run its flows with the loom command, which loads TypeScript with tsx: npm install -D tsx, then",
        `  npx loom run src/flows.ts greet --input '{"name":"ada"}'`,
        "",
      ].join("\n"),
    );
    const dir = join(cwd, "My Project!");
    expect(filesIn(dir)).toEqual(FILES);

    // I2: the running Loom's version, and the toolchain Loom is built with.
    expect(JSON.parse(read(dir, "package.json"))).toEqual({
      name: "my-project",
      version: "0.1.0",
      private: true,
      type: "module",
      scripts: { build: "tsc", start: "npm run build && node dist/main.js" },
      engines: { node: ">=20" },
      dependencies: {
        loomwork: `^${LOOM.version}`,
        "better-sqlite3": LOOM.peerDependencies?.["better-sqlite3"] ?? "^12.11.1",
      },
      devDependencies: {
        typescript: LOOM.devDependencies?.typescript ?? "^6.0.3",
        "@types/node": LOOM.devDependencies?.["@types/node"] ?? "^20.19.0",
      },
    });
    const tsconfig = JSON.parse(read(dir, "tsconfig.json")) as { compilerOptions: unknown };
    expect(tsconfig.compilerOptions).toEqual({
      strict: true,
      module: "NodeNext",
      moduleResolution: "NodeNext",
      target: "ES2022",
      rootDir: "src",
      outDir: "dist",
      types: ["node"],
      skipLibCheck: false,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
    });

    const flows = read(dir, "src/flows.ts");
    expect(flows).toContain(`import { flow$ } from "loomwork";`);
    expect(flows).toContain(
      `export const greet = flow$("greet", async (ctx, input: { name: string })`,
    );
    expect(flows.match(/await ctx\.run\(/g)).toHaveLength(2);
    const main = read(dir, "src/main.ts");
    expect(main).toContain(`import { createRuntime } from "loomwork";`);
    expect(main).toContain(`import { sqliteStore } from "loomwork/sqlite";`);
    // NodeNext resolves relative imports by their emitted name.
    expect(main).toContain(`import { greet } from "./flows.js";`);
    expect(main).toContain(`createRuntime({ store: sqliteStore("loom.db") })`);
    expect(main).toContain("await runtime.start(greet, { name: ");
    expect(main).toContain("await handle.result()");
    expect(main).toContain("await runtime.close()");
    expect(read(dir, ".gitignore").split("\n")).toEqual(["node_modules/", "dist/", "*.db*", ""]);
    expect(read(dir, "README.md")).toMatch(/^# my-project\n[\s\S]*npm install\nnpm start\n/);
  });

  it("without a folder, writes into the working directory and needs no cd", async () => {
    const cwd = tempDir();
    const r = await loom(cwd, "init");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("wrote a Loom project in .:\n");
    expect(r.stdout).toContain("\nbuild and run it:\n  npm install\n  npm start\n");
    expect(filesIn(cwd)).toEqual(FILES);
    const name = (JSON.parse(read(cwd, "package.json")) as { name: string }).name;
    expect(name).toBe(basename(cwd).toLowerCase());
  });

  it("a second init into the same folder exits 1 and changes nothing (I1)", async () => {
    const cwd = tempDir();
    expect((await loom(cwd, "init", "app")).code).toBe(0);
    const before = snapshot(cwd);
    const again = await loom(cwd, "init", "app");
    expect(again.code).toBe(1);
    expect(again.stdout).toBe("");
    expect(oneErrorLine(again)).toBe(
      "loom: loom init writes nothing into app: package.json, tsconfig.json, src/flows.ts, " +
        "src/main.ts, README.md, .gitignore already exist (pick a new or empty folder)",
    );
    expect(snapshot(cwd)).toEqual(before);
  });

  it("one thing in the way, even a dangling link or a file where a folder goes: nothing is written (I1)", async () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, "README.md"), "mine\n");
    writeFileSync(join(cwd, "src"), "a file, where init wants a folder\n");
    symlinkSync(join(cwd, "nowhere"), join(cwd, ".gitignore"));
    const before = snapshot(cwd);
    const r = await loom(cwd, "init");
    expect(r.code).toBe(1);
    expect(oneErrorLine(r)).toBe(
      "loom: loom init writes nothing into .: src, README.md, .gitignore already exist " +
        "(pick a new or empty folder)",
    );
    expect(snapshot(cwd)).toEqual(before);
  });

  it("a path that is a file, or runs through one, exits 1 and writes nothing", async () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, "notes.txt"), "keep me\n");
    mkdirSync(join(cwd, "empty"));
    const before = snapshot(cwd);
    const [file, through] = await Promise.all([
      loom(cwd, "init", "notes.txt"),
      loom(cwd, "init", "notes.txt/app"),
    ]);
    expect(file.code).toBe(1);
    expect(oneErrorLine(file)).toBe(
      "loom: notes.txt is not a folder: loom init writes a project into a folder",
    );
    expect(through.code).toBe(1);
    expect(oneErrorLine(through)).toBe(
      "loom: notes.txt/app is not a folder: loom init writes a project into a folder",
    );
    expect(snapshot(cwd)).toEqual(before);
  });

  it("takes at most one folder and no database flag", () => {
    expect(parseCommand(["init"])).toEqual({ name: "init", dir: "." });
    expect(parseCommand(["init", "../x"])).toEqual({ name: "init", dir: "../x" });
    for (const argv of [
      ["init", "a", "b"],
      ["init", ""],
      ["init", "--db", "x.db"],
      ["init", "--pg", "postgres://h/db"],
      ["init", "--pg-schema", "s"],
      ["init", "--json"],
    ]) {
      expect(() => parseCommand(argv), argv.join(" ")).toThrow(UsageError);
    }
  });
});
