/**
 * `loom init [dir]`: writes a new project into `dir` (default: the working directory) that uses
 * Loom as an installed npm package, `loomwork`, so that `cd dir && npm install` and `npm start`
 * build and run a flow. It opens no database.
 *
 * I1: all or nothing. When a file it would write exists (or a folder it would write into is not
 *     a folder), it writes nothing and fails with exit 1, naming what is in the way. Each file is
 *     then created exclusively (`wx`), so one that appears meanwhile is never overwritten.
 * I2: the project depends on the Loom running this command: `loomwork` at its version, and the
 *     `typescript` and `@types/node` versions Loom itself is built with, read from Loom's own
 *     package.json (`../../../package.json` is the package root both from src/cli/commands/ and
 *     from dist/cli/commands/).
 */
import { lstatSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import type { Command } from "../args.ts";
import { CliError } from "../cli-error.ts";
import { shellQuote } from "../format.ts";
import type { Io } from "../io.ts";

type InitCommand = Extract<Command, { name: "init" }>;

/** Used when Loom's package.json does not name them (I2). */
const FALLBACK = {
  "better-sqlite3": "^12.11.1",
  typescript: "^6.0.3",
  "@types/node": "^20.19.0",
} as const;

/** The flow the scaffold defines, and the input the examples give it. */
const FLOW = "greet";
const EXAMPLE_INPUT = '{"name":"ada"}';

export async function initCommand(cmd: InitCommand, io: Io): Promise<number> {
  const root = resolve(io.cwd, cmd.dir);
  const shown = shellQuote(cmd.dir);
  if (!isFolderOrNothing(root)) {
    throw new CliError(`${shown} is not a folder: loom init writes a project into a folder`);
  }
  const files = scaffold(packageNameFor(basename(root)), loomVersions());
  const inTheWay = new Set<string>();
  for (const [path] of files) {
    const blocked = foldersOf(path).find((folder) => !isFolderOrNothing(join(root, folder)));
    if (blocked !== undefined) inTheWay.add(blocked);
    else if (lstatSync(join(root, path), { throwIfNoEntry: false })) inTheWay.add(path);
  }
  if (inTheWay.size > 0) {
    throw new CliError(
      `loom init writes nothing into ${shown}: ${[...inTheWay].join(", ")} already ` +
        `${inTheWay.size === 1 ? "exists" : "exist"} (pick a new or empty folder)`,
    );
  }
  for (const [path, text] of files) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text, { flag: "wx" });
  }
  io.out(report(shown, files));
  return 0;
}

/** What was written and the commands to run next; `dir` as the user gave it, shell-quoted. */
function report(dir: string, files: readonly (readonly [string, string])[]): string {
  const into = dir === "." ? "npm install" : `cd ${dir} && npm install`;
  return [
    `wrote a Loom project in ${dir}:`,
    ...files.map(([path]) => `  ${path}`),
    "",
    "build and run it:",
    `  ${into}`,
    "  npm start",
    "",
    `to run its flows with the loom command, which loads TypeScript with tsx: npm install -D tsx, then`,
    `  npx loom run src/flows.ts ${FLOW} --input '${EXAMPLE_INPUT}'`,
  ].join("\n");
}

/**
 * A folder's name made into an npm package name: lowercase letters, digits, `-`, `.` and `_`,
 * starting and ending with a letter or digit, at most 214 characters.
 */
function packageNameFor(folder: string): string {
  const name = folder
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "")
    .slice(0, 214)
    .replace(/[^a-z0-9]+$/, "");
  return name === "" || name === "node_modules" ? "loom-app" : name;
}

interface Versions {
  loomwork: string;
  "better-sqlite3": string;
  typescript: string;
  "@types/node": string;
}

function loomVersions(): Versions {
  const url = new URL("../../../package.json", import.meta.url);
  let manifest: {
    version?: unknown;
    peerDependencies?: Record<string, unknown>;
    devDependencies?: Record<string, unknown>;
  };
  try {
    manifest = JSON.parse(readFileSync(url, "utf8")) as typeof manifest;
  } catch (e) {
    throw new CliError(`cannot read Loom's package.json at ${url.pathname}: ${String(e)}`);
  }
  if (typeof manifest.version !== "string") {
    throw new CliError(`Loom's package.json at ${url.pathname} has no version`);
  }
  const pick = (from: Record<string, unknown> | undefined, name: keyof typeof FALLBACK) => {
    const range = from?.[name];
    return typeof range === "string" ? range : FALLBACK[name];
  };
  return {
    loomwork: `^${manifest.version}`,
    "better-sqlite3": pick(manifest.peerDependencies, "better-sqlite3"),
    typescript: pick(manifest.devDependencies, "typescript"),
    "@types/node": pick(manifest.devDependencies, "@types/node"),
  };
}

/** The files, by path relative to the project, in the order they are written and listed. */
function scaffold(name: string, v: Versions): [string, string][] {
  const packageJson = {
    name,
    version: "0.1.0",
    private: true,
    type: "module",
    scripts: { build: "tsc", start: "npm run build && node dist/main.js" },
    engines: { node: ">=20" },
    dependencies: { "better-sqlite3": v["better-sqlite3"], loomwork: v.loomwork },
    devDependencies: { "@types/node": v["@types/node"], typescript: v.typescript },
  };
  const tsconfig = {
    compilerOptions: {
      target: "ES2022",
      module: "NodeNext",
      moduleResolution: "NodeNext",
      rootDir: "src",
      outDir: "dist",
      types: ["node"],
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: false,
    },
    include: ["src"],
  };
  return [
    ["package.json", `${JSON.stringify(packageJson, null, 2)}\n`],
    ["tsconfig.json", `${JSON.stringify(tsconfig, null, 2)}\n`],
    ["src/flows.ts", FLOWS_TS],
    ["src/main.ts", MAIN_TS],
    ["README.md", readme(name)],
    [".gitignore", "node_modules/\ndist/\n*.db*\n"],
  ];
}

const FLOWS_TS = `import { flow$ } from "loomwork";

/**
 * Greets someone in two steps. Each step's result is recorded in the database before the flow
 * goes on, so a flow run again after a crash answers its finished steps from the record.
 */
export const ${FLOW} = flow$("${FLOW}", async (ctx, input: { name: string }) => {
  const text = await ctx.run("compose", () => \`hello \${input.name}\`);
  const shout = await ctx.run("shout", () => text.toUpperCase());
  return { text, shout };
});
`;

const MAIN_TS = `import { createRuntime } from "loomwork";
import { sqliteStore } from "loomwork/sqlite";
import { ${FLOW} } from "./flows.js";

// loom.db holds every execution's log: delete it to start over.
const runtime = createRuntime({ store: sqliteStore("loom.db") });
try {
  // A fixed id: started again, the execution is not run twice; its recorded outcome comes back.
  const handle = await runtime.start(${FLOW}, { name: "world" }, { id: "${FLOW}-world" });
  const outcome = await handle.result();
  if (outcome.status === "completed") {
    console.log(outcome.output);
  } else {
    console.error(\`${FLOW} \${outcome.status}:\`, outcome.error);
    process.exitCode = 1;
  }
} finally {
  await runtime.close();
}
`;

function readme(name: string): string {
  return `# ${name}

A flow on [Loom](https://www.npmjs.com/package/loomwork), a durable-execution kernel: each step's
result is recorded in \`loom.db\`, so a flow survives crashes and restarts and a finished step
never runs again. \`src/flows.ts\` defines the flow, \`src/main.ts\` starts it.

\`\`\`sh
npm install
npm start
\`\`\`

With \`npm install -D tsx\`, the \`loom\` command runs and inspects flows too:
\`npx loom run src/flows.ts ${FLOW} --input '${EXAMPLE_INPUT}'\`, \`npx loom ls\`, \`npx loom show <id>\`.
`;
}

/**
 * Nothing there, or a folder (or a link to one). Anything else is in the way of `mkdir` and of an
 * exclusive write (I1): a file, a dangling link, a path through a file (ENOTDIR).
 */
function isFolderOrNothing(path: string): boolean {
  try {
    if (!lstatSync(path, { throwIfNoEntry: false })) return true;
    return statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
  } catch (e) {
    if ((e as { code?: unknown }).code === "ENOTDIR") return false;
    throw e;
  }
}

/** `src/a/b.ts` → `["src", "src/a"]`. */
function foldersOf(path: string): string[] {
  const parts = path.split("/").slice(0, -1);
  return parts.map((_, i) => parts.slice(0, i + 1).join("/"));
}
