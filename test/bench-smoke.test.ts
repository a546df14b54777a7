/**
 * The issue 23 benchmarks run end to end at toy sizes and print a summary of the shape their
 * docs promise: a bench that no longer runs on the store's current row format (as `resume
 * --uncached` once did, after SQLite migration 6) fails here, not on the next person to measure.
 * Only the shape is checked, never a figure: figures belong to the benchmarks themselves.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { slow } from "./support/slowdown.ts";

const root = join(import.meta.dirname, "..");

/** Runs `npm run bench -- ...args` (through tsx) and returns its JSON lines. */
function bench(args: readonly string[], env: NodeJS.ProcessEnv = {}): Record<string, unknown>[] {
  const out = spawnSync(
    process.execPath,
    ["--import", "tsx", join(root, "bench/run.ts"), ...args],
    {
      cwd: root,
      encoding: "utf8",
      timeout: slow(120_000),
      killSignal: "SIGKILL",
      env: { ...process.env, LOOM_PG_URL: "", ...env },
    },
  );
  expect(out.status, out.stderr).toBe(0);
  return out.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const summary = (lines: Record<string, unknown>[]) => lines[lines.length - 1] ?? {};

describe("issue 23 benchmarks at toy sizes", () => {
  it("start prints p50, the raw insert beside it, and commits and reads per start", () => {
    const s = summary(bench(["start", "--starts", "5", "--rounds", "1", "--store", "sqlite"]));
    expect(s).toMatchObject({ name: "start", store: "sqlite", commitsPerStart: 2 });
    for (const k of ["p50Ms", "p99Ms", "rawInsertP50Ms", "ratioP50", "readsPerStart"]) {
      expect(typeof s[k]).toBe("number");
    }
  });

  it("storage prints bytes per step and per one-step flow beside a raw row", () => {
    const s = summary(bench(["storage", "--steps", "300", "--flows", "60", "--store", "sqlite"]));
    expect(s).toMatchObject({ name: "storage", store: "sqlite" });
    for (const k of ["bytesPerStep", "rawBytesPerStep", "bytesPerOneStepFlow", "oneStepRatio"]) {
      expect(s[k]).toBeGreaterThan(0);
    }
    // The hand-written job's rows hold the input and the result besides the run's row: more than
    // the raw row, which holds the result only.
    expect(s.handWrittenBytesPerOneStepFlow).toBeGreaterThan(Number(s.rawBytesPerOneStepFlow));
  });

  it("resume --uncached prints µs per replayed event", () => {
    const s = summary(bench(["resume", "--uncached", "--turns", "50", "--rounds", "2"]));
    expect(s).toMatchObject({ name: "resume", mode: "uncached" });
    expect(JSON.stringify(s.cpuUsPerEvent)).toMatch(/"50":\d/);
  });

  it("conversation --uncached prints the per-resume cost by generation beside the body kept", () => {
    const s = summary(bench(["conversation", "--uncached", "--turns", "40", "--rotate", "20"]));
    expect(s).toMatchObject({ name: "conversation", mode: "uncached", by: "generation" });
    expect(Object.keys(s.perResumeMsBy as object)).toEqual(["0", "1"]);
    for (const k of [
      "perResumeMsFirst",
      "perResumeMsLast",
      "parkedPerResumeMs",
      "seedPerResumeMs",
    ]) {
      expect(s[k]).toBeGreaterThan(0);
    }
    // Every resume replayed: one body run per resume, besides the starts of generations 0..2 (turn
    // 40 rotates).
    expect(s.bodyRuns).toBe(43);
  });
});
