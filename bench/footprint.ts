/**
 * `npm run bench -- footprint [--rounds 7]`: what importing Loom costs a process, from the built
 * package (dist/), beside a bare `node` measured in the same run (issue 12).
 *
 * Each round starts fresh child processes of this Node, in the repo so that `import("loomwork")`
 * resolves through the package's self-reference to dist/ exactly as a user's import does:
 *   - baseline: `node --input-type=module -e` that imports nothing and reports its RSS;
 *   - import: the same, after `import("loomwork")` and `import("loomwork/sqlite")`, also timing
 *     the two imports (`importMs`);
 *   - one flow: the imports, then a two-step flow on a SQLite file, run and closed, which loads
 *     better-sqlite3's native module (`rssOneFlowMb`).
 * The summary takes each figure's median. **Target: `deltaMb` = rssImportRootMb -
 * rssBaselineMb <= 25.**
 */
import { spawnSync } from "node:child_process";
import { statSync } from "node:fs";
import { join } from "node:path";
import { emit, intFlag, median, note, parseFlags, round, withTempDir } from "./lib.ts";

const root = join(import.meta.dirname, "..");
const TARGET_DELTA_MB = 25;
const MB = 1024 * 1024;

/** RSS is read before `process.stdout` is first touched: opening the stream costs memory too. */
const REPORT = `const rss = process.memoryUsage().rss;
process.stdout.write(JSON.stringify({ rss, importMs }));`;

const BASELINE = `const importMs = 0;\n${REPORT}`;

const IMPORT = `const t0 = performance.now();
await import("loomwork");
await import("loomwork/sqlite");
const importMs = performance.now() - t0;
${REPORT}`;

const ONE_FLOW = (dbFile: string) => `const t0 = performance.now();
const { createRuntime, flow$ } = await import("loomwork");
const { sqliteStore } = await import("loomwork/sqlite");
const importMs = performance.now() - t0;
const twoSteps = flow$("two-steps", async (ctx, input) => {
  const text = await ctx.run("compose", () => "hello " + input.name);
  return ctx.run("shout", () => text.toUpperCase());
});
const runtime = createRuntime({ store: sqliteStore(${JSON.stringify(dbFile)}) });
const outcome = await (await runtime.start(twoSteps, { name: "ada" })).result();
await runtime.close();
if (outcome.status !== "completed") throw new Error(JSON.stringify(outcome));
${REPORT}`;

interface Sample {
  rss: number;
  importMs: number;
}

/** A fresh process of this Node, without loaders (no NODE_OPTIONS), in the repo. */
function measure(code: string): Sample {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", code], {
    cwd: root,
    env,
    encoding: "utf8",
    timeout: 60_000,
  });
  if (r.status !== 0) {
    throw new Error(`footprint child exited with ${String(r.status)}: ${r.stderr || r.stdout}`);
  }
  return JSON.parse(r.stdout) as Sample;
}

/** dist/ is what is measured: refuse to run without it, and say when src/ changed since. */
function checkBuilt(): void {
  const built = statSync(join(root, "dist", ".built"), { throwIfNoEntry: false });
  if (!built) throw new Error("footprint measures dist/: run `npm run build` first");
  note(`footprint: dist/ built ${built.mtime.toISOString()}`);
}

export async function footprintBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["rounds"]);
  const rounds = intFlag(flags, "rounds", 7);
  checkBuilt();
  note(`footprint: ${rounds} rounds of fresh processes on node ${process.version}`);
  const baseline: number[] = [];
  const imported: number[] = [];
  const importMs: number[] = [];
  const oneFlow: number[] = [];
  await withTempDir(async (dir) => {
    for (let i = 1; i <= rounds; i++) {
      const b = measure(BASELINE);
      const m = measure(IMPORT);
      const f = measure(ONE_FLOW(join(dir, `round-${i}.db`)));
      baseline.push(b.rss / MB);
      imported.push(m.rss / MB);
      importMs.push(m.importMs);
      oneFlow.push(f.rss / MB);
      emit({
        name: "footprint",
        phase: "round",
        round: i,
        rssBaselineMb: round(b.rss / MB, 1),
        rssImportRootMb: round(m.rss / MB, 1),
        importMs: round(m.importMs, 1),
        rssOneFlowMb: round(f.rss / MB, 1),
      });
    }
  });
  const deltaMb = median(imported) - median(baseline);
  emit({
    name: "footprint",
    rssImportRootMb: round(median(imported), 1),
    rssBaselineMb: round(median(baseline), 1),
    importMs: round(median(importMs), 1),
    deltaMb: round(deltaMb, 1),
    rssOneFlowMb: round(median(oneFlow), 1),
    targetDeltaMb: TARGET_DELTA_MB,
    pass: deltaMb <= TARGET_DELTA_MB,
    rounds,
    node: process.version,
  });
}
