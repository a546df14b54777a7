#!/usr/bin/env node
// The package as a user gets it: `npm pack`, installed from the tarball into a project written
// by `loom init`, then used from plain JavaScript, from strict TypeScript, and through the
// scaffold's own `npm start`, all under one Node binary (`--node PATH`, default: this one).
//
//   node scripts/package-smoke.mjs [--node PATH] [--checks] [--keep]
//
// `--checks` adds publint (strict) and attw (`--profile esm-only`) on the tarball; `--keep`
// leaves the temp folder in place. Progress goes to stderr; stdout is one JSON line, the summary.
//
// S1: nothing here loads TypeScript at run time: app.mjs runs under a bare `node`, with no
//     loader (NODE_OPTIONS and npm's npm_* variables are removed from every child's env).
// S2: the app installs with `--ignore-scripts`, so better-sqlite3 is not compiled there: its
//     folder becomes a link to a copy built for that Node's ABI (the repo's own for this Node;
//     for another, one built once under .tmp/better-sqlite3-abi<N>/ and reused after).
// S3: a step that cannot leave a usable app behind (pack, init, install, the sqlite link) ends
//     the run; every later step runs even when an earlier one failed, so one run reports them
//     all. Any failure is exit 1, named in `failed`.
// Written in plain JavaScript so that it runs under any Node the package claims to support.
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const MINUTE_MS = 60_000;

class SmokeError extends Error {
  name = "SmokeError";
}

const { values: opts } = parseArgs({
  options: {
    node: { type: "string", default: process.execPath },
    checks: { type: "boolean", default: false },
    keep: { type: "boolean", default: false },
  },
});
const node = resolve(opts.node);
const started = performance.now();
const tmp = mkdtempSync(join(tmpdir(), "loom-smoke-"));
const app = join(tmp, "app");
const baseEnv = cleanEnv();
const nodeEnv = { ...baseEnv, PATH: `${dirname(node)}${delimiter}${baseEnv.PATH ?? ""}` };
const summary = { name: "package-smoke", ok: false, node: "", abi: "", checks: opts.checks };
const stepMs = {};
const failed = [];

async function main() {
  const probe = ["-p", "process.version + ' ' + process.versions.modules"];
  const { stdout } = await step("node", () => mustRun(node, probe));
  [summary.node, summary.abi] = stdout.trim().split(" ");
  progress(`node ${summary.node} (ABI ${summary.abi}) at ${node}; temp ${tmp}`);

  const tarball = await step("pack", pack);
  await step("init", () => init(tarball));
  const install = ["install", "--no-audit", "--no-fund", "--ignore-scripts"];
  await step("install", () => mustRun("npm", install, { cwd: app, env: nodeEnv }));
  summary.sqlite = await step("sqlite", linkSqlite);

  await check("app-mjs", runAppMjs);
  await Promise.all([check("tsc-app", typecheckApp), check("tsc-wrong", typecheckWrong)]);
  await check("subpaths", importSubpaths);
  await check("npm-start", npmStart);
  await check("missing-peer", missingPeer);
  await check("ai-sdk-without-peers", aiSdkWithoutPeers);
  await check("missing-tsx", missingTsx);
  if (opts.checks) {
    await Promise.all([
      check("publint", () => publint(tarball)),
      check("attw", () => attw(tarball)),
    ]);
  }
}

// a. The tarball, from a fresh build.
async function pack() {
  if (!buildIsFresh()) {
    progress("dist/ is older than src/ (or missing): npm run build");
    await mustRun(process.execPath, [join(root, "scripts", "build.mjs")], { cwd: root });
  }
  const args = ["pack", "--json", "--ignore-scripts", "--pack-destination", tmp];
  const { stdout } = await mustRun("npm", args, { cwd: root });
  const [packed] = JSON.parse(stdout);
  summary.tarball = packed.filename;
  summary.packedBytes = packed.size;
  summary.unpackedBytes = packed.unpackedSize;
  summary.entryCount = packed.entryCount;
  return join(tmp, packed.filename);
}

function buildIsFresh() {
  const built = statSync(join(root, "dist", ".built"), { throwIfNoEntry: false });
  if (!built) return false;
  const inputs = [join(root, "tsconfig.build.json"), ...walk(join(root, "src"))];
  return inputs.every((file) => statSync(file).mtimeMs <= built.mtimeMs);
}

// b. `loom init`, then loomwork from the tarball.
async function init(tarball) {
  await mustRun(node, [join(root, "bin", "loom.js"), "init", app], { env: nodeEnv });
  const manifestPath = join(app, "package.json");
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  expect(manifest.type === "module", `the scaffold's package.json has type ${manifest.type}`);
  expect(manifest.dependencies?.loomwork, "the scaffold does not depend on loomwork");
  manifest.dependencies.loomwork = `file:${tarball}`;
  writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
}

// b. better-sqlite3 built for this Node's ABI (S2).
async function linkSqlite() {
  const { dir, how } =
    summary.abi === process.versions.modules
      ? { dir: join(root, "node_modules", "better-sqlite3"), how: "repo" }
      : await sqliteForAbi(summary.abi);
  const target = join(app, "node_modules", "better-sqlite3");
  rmSync(target, { recursive: true, force: true });
  symlinkSync(dir, target, "dir");
  const open = "new (require('better-sqlite3'))(':memory:').close()";
  await mustRun(node, ["-e", open], { cwd: app, env: nodeEnv });
  return how;
}

async function sqliteForAbi(abi) {
  const final = join(root, ".tmp", `better-sqlite3-abi${abi}`);
  const dir = join(final, "node_modules", "better-sqlite3");
  if (existsSync(join(dir, "build", "Release", "better_sqlite3.node")))
    return { dir, how: "reused" };
  const nodedir = dirname(dirname(realpathSync(node)));
  expect(
    existsSync(join(nodedir, "include", "node", "node.h")),
    `${nodedir}/include/node holds no headers: cannot build better-sqlite3 for ${node}`,
  );
  const version = String(readManifest(root).devDependencies["better-sqlite3"]).replace(/^\D+/, "");
  // Built beside the final folder and renamed into place, so a run that is stopped halfway (or
  // one running at the same time) never leaves a half-built copy where the next run looks.
  const work = `${final}.partial-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  writeFileSync(join(work, "package.json"), `{ "name": "abi${abi}", "private": true }\n`);
  progress(`building better-sqlite3@${version} for ABI ${abi} (a few minutes)`);
  const args = ["install", `better-sqlite3@${version}`, "--no-audit", "--no-fund"];
  await mustRun("npm", [...args, `--nodedir=${nodedir}`], {
    cwd: work,
    env: nodeEnv,
    timeoutMs: 20 * MINUTE_MS,
  });
  try {
    renameSync(work, final);
  } catch (e) {
    rmSync(work, { recursive: true, force: true });
    if (!existsSync(dir)) throw e;
  }
  return { dir, how: "built" };
}

const FLOW_JS = `const twoSteps = flow$("two-steps", async (ctx, input) => {
  const text = await ctx.run("compose", () => \`hello \${input.name}\`);
  const shout = await ctx.run("shout", () => text.toUpperCase());
  return { text, shout };
});`;

const FLOW_TS = FLOW_JS.replace("(ctx, input)", "(ctx, input: Input)");

function appSource(flow, dbFile, startCall, useOutput = "") {
  return `import { createRuntime, flow$ } from "loomwork";
import { sqliteStore } from "loomwork/sqlite";

${flow}

const runtime = createRuntime({ store: sqliteStore("${dbFile}") });
try {
  const handle = await ${startCall};
  const outcome = await handle.result();${useOutput}
  console.log(JSON.stringify(outcome.status === "completed" ? outcome.output : outcome));
} finally {
  await runtime.close();
}
`;
}

// c. Plain JavaScript under a bare node (S1).
async function runAppMjs() {
  writeFileSync(
    join(app, "app.mjs"),
    appSource(FLOW_JS, "app-mjs.db", 'runtime.start(twoSteps, { name: "ada" })'),
  );
  const { stdout } = await mustRun(node, ["app.mjs"], { cwd: app, env: nodeEnv });
  const want = JSON.stringify({ text: "hello ada", shout: "HELLO ADA" });
  const got = stdout.trim().split("\n").at(-1);
  expect(got === want, `app.mjs printed ${JSON.stringify(got)}, expected ${want}`);
}

const CHECK_OPTIONS = {
  strict: true,
  module: "NodeNext",
  moduleResolution: "NodeNext",
  target: "ES2022",
  exactOptionalPropertyTypes: true,
  noPropertyAccessFromIndexSignature: true,
  noUncheckedIndexedAccess: true,
  skipLibCheck: false,
  noEmit: true,
  types: ["node"],
};

function tsc(config, file, text) {
  writeFileSync(join(app, file), text);
  const tsconfig = { compilerOptions: CHECK_OPTIONS, files: [file] };
  writeFileSync(join(app, config), `${JSON.stringify(tsconfig, null, 2)}\n`);
  const bin = join("node_modules", "typescript", "bin", "tsc");
  return run(node, [bin, "-p", config], { cwd: app, env: nodeEnv });
}

// d. The same app in strict TypeScript, against the shipped declarations: no error, and the
// flow's output type reaches `result()`.
async function typecheckApp() {
  const text = appSource(
    `interface Input {\n  name: string;\n}\n\n${FLOW_TS}`,
    "app-ts.db",
    'runtime.start(twoSteps, { name: "ada" })',
    "\n  const shout: string | undefined = outcome.output?.shout;\n  console.error(shout);",
  );
  const r = await tsc("tsconfig.check.json", "app.ts", text);
  if (r.code !== 0) throw new SmokeError(`tsc reported errors on app.ts:\n${tail(r)}`);
}

// e. A flow's input type reaches `start`: a wrong field is a compile error.
async function typecheckWrong() {
  const flow = `const greet = flow$("greet", async (_ctx, input: { name: string }) => input.name);`;
  const text = appSource(flow, "wrong.db", "runtime.start(greet, { wrongField: 42 })");
  const r = await tsc("tsconfig.wrong.json", "wrong.ts", text);
  summary.typedStart = r.code !== 0;
  if (r.code === 0) {
    throw new SmokeError(
      "tsc accepted runtime.start(greet, { wrongField: 42 }) for a flow whose input is " +
        "{ name: string }: start does not type its input",
    );
  }
  const out = `${r.stdout}${r.stderr}`;
  expect(out.includes("wrongField"), `tsc failed on wrong.ts without naming wrongField:\n${out}`);
  progress(`tsc on wrong.ts, as it should: ${out.split("\n")[0]}`);
}

// Every subpath loads without its peer installed (peers load on first use); `require` is noted.
async function importSubpaths() {
  const exportsMap = readManifest(join(app, "node_modules", "loomwork")).exports;
  const subpaths = Object.keys(exportsMap)
    .filter((key) => key !== "./package.json")
    .map((key) => `loomwork${key.slice(1)}`);
  const code = `import { createRequire } from "node:module";
const require = createRequire(process.cwd() + "/");
const out = { imported: [], importFailed: {}, requireFailed: {} };
for (const name of ${JSON.stringify(subpaths)}) {
  try { await import(name); out.imported.push(name); }
  catch (e) { out.importFailed[name] = String(e.code ?? "") + " " + e.message; }
  try { require(name); } catch (e) { out.requireFailed[name] = String(e.code ?? e.message); }
}
console.log(JSON.stringify(out));`;
  const r = await mustRun(node, ["--input-type=module", "-e", code], { cwd: app, env: nodeEnv });
  const out = JSON.parse(r.stdout.trim().split("\n").at(-1));
  summary.subpaths = out.imported.length;
  summary.requireWorks = Object.keys(out.requireFailed).length === 0;
  if (!summary.requireWorks) progress(`require() fails: ${JSON.stringify(out.requireFailed)}`);
  const bad = Object.entries(out.importFailed);
  if (bad.length > 0) {
    throw new SmokeError(`import failed:\n${bad.map(([k, v]) => `  ${k}: ${v}`).join("\n")}`);
  }
}

// f. The scaffold as written: `npm start` = tsc, then node dist/main.js.
async function npmStart() {
  const { stdout } = await mustRun("npm", ["start"], { cwd: app, env: nodeEnv });
  expect(
    stdout.includes("hello world") && stdout.includes("HELLO WORLD"),
    `npm start did not print the greet flow's output:\n${stdout}`,
  );
}

// g. An optional peer that is not installed: a MissingDependencyError naming it.
async function missingPeer() {
  const sdk = "@anthropic-ai/sdk";
  expect(!existsSync(join(app, "node_modules", sdk)), `npm installed the optional peer ${sdk}`);
  const code = `import { anthropicEffect } from "loomwork/anthropic";
try { anthropicEffect({ model: "m" }); console.log(JSON.stringify({ threw: false })); }
catch (e) { console.log(JSON.stringify({ threw: true, name: e.name, code: e.code, message: e.message })); }`;
  const r = await mustRun(node, ["--input-type=module", "-e", code], { cwd: app, env: nodeEnv });
  const got = JSON.parse(r.stdout.trim().split("\n").at(-1));
  const ok =
    got.code === "LOOM_MISSING_DEPENDENCY" && String(got.message).includes(`npm install ${sdk}`);
  expect(ok, `anthropicEffect without ${sdk} gave ${JSON.stringify(got)}`);
}

// loomwork/ai-sdk takes the AI SDK's types only: with neither \`ai\` nor \`@ai-sdk/provider\`
// installed it loads, and wraps a hand-written model of the SDK's v4 specification.
async function aiSdkWithoutPeers() {
  for (const peer of ["ai", "@ai-sdk/provider"]) {
    expect(!existsSync(join(app, "node_modules", peer)), `npm installed the optional peer ${peer}`);
  }
  const code = `import { durableModel } from "loomwork/ai-sdk";
const model = durableModel({ specificationVersion: "v4", provider: "hand.written", modelId: "m",
  supportedUrls: {}, doGenerate: async () => ({}), doStream: async () => ({}) });
console.log(JSON.stringify({ provider: model.provider, v: model.specificationVersion }));`;
  const r = await mustRun(node, ["--input-type=module", "-e", code], { cwd: app, env: nodeEnv });
  const got = r.stdout.trim().split("\n").at(-1);
  const want = JSON.stringify({ provider: "hand.written", v: "v4" });
  expect(got === want, `durableModel without the AI SDK printed ${got}, expected ${want}`);
  summary.aiSdkWithoutPeers = true;
}

// The loom command runs JavaScript without tsx, and says what to install for a .ts module.
async function missingTsx() {
  expect(!existsSync(join(app, "node_modules", "tsx")), "npm installed the optional peer tsx");
  const bin = join(app, "node_modules", "loomwork", "bin", "loom.js");
  const args = [bin, "run", "src/flows.ts", "greet", "--input", '{"name":"ada"}'];
  const r = await run(node, args, { cwd: app, env: nodeEnv });
  expect(r.code === 1, `loom run of a .ts module without tsx exited ${r.code}`);
  expect(r.stderr.includes("npm install tsx"), `loom run without tsx said: ${r.stderr.trim()}`);
}

// h. Linters of the packed tarball, run by this Node from the repo's devDependencies.
async function publint(tarball) {
  const r = await mustRun(process.execPath, [binOf("publint"), "run", tarball, "--strict"]);
  progress(`publint:\n${r.stdout.trim()}`);
  summary.publint = "ok";
}

async function attw(tarball) {
  const argv = [binOf("@arethetypeswrong/cli"), tarball, "--profile", "esm-only"];
  const r = await mustRun(process.execPath, [...argv, "--no-color", "--no-emoji"]);
  progress(`attw:\n${r.stdout.trim()}`);
  summary.attw = "ok";
}

/** A devDependency's command (publint exports no ./package.json, so not through require). */
function binOf(pkg) {
  const dir = join(root, "node_modules", pkg);
  const { bin } = readManifest(dir);
  return join(dir, typeof bin === "string" ? bin : Object.values(bin)[0]);
}

// --- plumbing ---

async function step(name, fn) {
  const t0 = performance.now();
  progress(`${name} ...`);
  let value;
  try {
    value = await fn();
  } catch (e) {
    if (e instanceof Error) e.step ??= name;
    throw e;
  }
  stepMs[name] = Math.round(performance.now() - t0);
  progress(`${name} ok (${(stepMs[name] / 1000).toFixed(1)} s)`);
  return value;
}

/** A step whose failure is recorded and does not stop the run (S3). */
async function check(name, fn) {
  try {
    await step(name, fn);
  } catch (e) {
    fail(name, e);
  }
}

function fail(name, e) {
  failed.push(name);
  progress(`${name} FAILED: ${e instanceof SmokeError ? e.message : (e?.stack ?? String(e))}`);
}

function expect(condition, message) {
  if (!condition) throw new SmokeError(message);
}

/** A child process, its output collected; never rejects. */
function run(cmd, args, { cwd = root, env = baseEnv, timeoutMs = 10 * MINUTE_MS } = {}) {
  return new Promise((done) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
    child.on("error", (e) => (stderr += `${e.message}\n`));
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const why = signal ? `killed by ${signal}${signal === "SIGTERM" ? " (timeout)" : ""}` : "";
      done({ code: code ?? 1, stdout, stderr: `${stderr}${why}`, command: [cmd, ...args] });
    });
  });
}

async function mustRun(cmd, args, options) {
  const r = await run(cmd, args, options);
  if (r.code !== 0) {
    throw new SmokeError(`\`${r.command.join(" ")}\` exited with ${r.code}:\n${tail(r)}`);
  }
  return r;
}

function tail({ stdout, stderr }, lines = 60) {
  return `${stdout}${stderr}`.trimEnd().split("\n").slice(-lines).join("\n");
}

function progress(message) {
  process.stderr.write(`smoke: ${message}\n`);
}

function cleanEnv() {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (/^npm_/i.test(key) || key === "NODE_OPTIONS" || key === "INIT_CWD") delete env[key];
  }
  return env;
}

function readManifest(dir) {
  return JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
}

function* walk(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else yield path;
  }
}

// --- the run, last: it needs every constant above ---

try {
  await main();
} catch (e) {
  fail(e?.step ?? "smoke", e);
} finally {
  if (opts.keep) progress(`kept ${tmp}`);
  else rmSync(tmp, { recursive: true, force: true });
}
summary.ok = failed.length === 0;
summary.failed = failed;
summary.stepMs = stepMs;
summary.totalMs = Math.round(performance.now() - started);
process.stdout.write(`${JSON.stringify(summary)}\n`);
if (!summary.ok) {
  progress(`FAILED: ${failed.join(", ")}${opts.keep ? "" : " (rerun with --keep to inspect)"}`);
  process.exitCode = 1;
}
