/**
 * `resume`: does a long-lived cached execution stay as cheap to wake at turn 20,000 as at 1,000?
 *
 * One execution of `for (;;) { msg = await ctx.suspend(); await ctx.run("turn", () => msg) }`
 * is driven by `await runtime.resume(id, { turn: k })` in a loop. One turn's latency is the time
 * from calling resume(k) to the moment turn k's step function runs (the step calls back into
 * this file). A RESUMED that arrives before the body suspends again is queued by the fold and
 * answers the next suspend, so the loop does not wait for the run to park.
 *
 * `--mode parked` waits, before each resume, until the run has parked (released its lease), so
 * every resume takes the wake-from-cache path (lease re-acquired, log tail read); the default,
 * `--mode hot`, resumes as soon as the previous turn's step ran.
 *
 * The baseline is the same execution's first checkpoint window (turns 801..1000): flatness is
 * p50 at the last checkpoint / p50 at the first. A warm-up of 1,000 turns on another execution
 * (not counted) runs first, so that window is not inflated by JIT compilation. Target on the memory store: <= 1.5. Snapshots
 * are at the runtime's default interval. `bodyRuns` counts entries into the flow body: 1 means
 * every turn was served by the cached run, never by a replay.
 */
import { join } from "node:path";
import { createRuntime, flow$, memoryStore } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { resumeUncachedBench } from "./resume-uncached.ts";
import type { Store } from "../src/store/spi.ts";
import {
  choiceFlag,
  countingStore,
  emit,
  intFlag,
  latencyStats,
  note,
  nowMs,
  parseFlags,
  round,
  UsageError,
  withTempDir,
  type LatencyStats,
} from "./lib.ts";

const WINDOW = 200;
const CHECKPOINTS = [1000, 5000, 10000, 20000];
const WARM_UP_TURNS = 1000;

interface Probe {
  bodyRuns: number;
  firedAtMs: Float64Array;
  waiting: { turn: number; resolve: () => void } | undefined;
}

function chatFlow(probe: Probe) {
  return flow$("bench-resume", async (ctx) => {
    probe.bodyRuns++;
    for (;;) {
      const msg = await ctx.suspend<{ turn: number }>();
      await ctx.run("turn", async () => {
        probe.firedAtMs[msg.turn] = nowMs();
        if (probe.waiting?.turn === msg.turn) probe.waiting.resolve();
        return msg;
      });
    }
  });
}

export async function resumeBench(argv: readonly string[]): Promise<void> {
  if (argv.includes("--uncached")) return resumeUncachedBench(argv);
  const flags = parseFlags(argv, ["turns", "store", "synchronous", "mode"]);
  const turns = intFlag(flags, "turns", 20000);
  const kind = choiceFlag(flags, "store", ["memory", "sqlite"] as const, "memory");
  const synchronous = choiceFlag(flags, "synchronous", ["FULL", "NORMAL"] as const, "FULL");
  const mode = choiceFlag(flags, "mode", ["hot", "parked"] as const, "hot");
  if (turns < WINDOW) throw new UsageError(`--turns must be at least ${WINDOW}`);
  await withTempDir(async (dir) => {
    const open = (file: string) =>
      kind === "memory" ? memoryStore() : sqliteStore(join(dir, file), { synchronous });
    const options = { kind, mode, synchronous: kind === "sqlite" ? synchronous : null };
    note(`resume: warm-up, ${WARM_UP_TURNS} turns on another execution (not counted)`);
    const t0 = nowMs();
    await drive(open("warm-up.db"), { ...options, turns: WARM_UP_TURNS, quiet: true });
    emit({ name: "resume", phase: "warm-up", counted: false, totalMs: round(nowMs() - t0) });
    await drive(open("resume.db"), { ...options, turns, quiet: false });
  });
}

interface Options {
  kind: string;
  mode: "hot" | "parked";
  turns: number;
  synchronous: string | null;
  /** A warm-up: print nothing. */
  quiet: boolean;
}

async function drive(inner: Store, options: Options): Promise<void> {
  const { kind, mode, turns, synchronous, quiet } = options;
  const checkpoints = CHECKPOINTS.filter((c) => c < turns).concat(turns);
  const probe: Probe = { bodyRuns: 0, firedAtMs: new Float64Array(turns + 1), waiting: undefined };
  const counting = countingStore(inner);
  const { store, counts } = counting;
  const runtime = createRuntime({ store });
  const latencyMs = new Float64Array(turns + 1);
  const stats = new Map<number, LatencyStats>();
  try {
    const handle = await runtime.start(chatFlow(probe), undefined, { id: "bench-chat" });
    const id = handle.id;
    // The body never returns: an outcome (or a stop) means the bench would wait forever.
    const ended = handle.result().then((o) => {
      throw new Error(`the bench execution ended (${o.status}); it should run forever`);
    });
    ended.catch(() => undefined);
    let mark = { ...counts, commits: runtime.journal.commits };
    const t0 = nowMs();
    for (let turn = 1; turn <= turns; turn++) {
      if (mode === "parked" && counts.releases < turn) {
        await new Promise<void>((resolve) => (counting.onRelease = resolve));
        // The release is called as the run parks; let that turn of the event loop finish.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      const fired = new Promise<void>((resolve) => (probe.waiting = { turn, resolve }));
      const calledAt = nowMs();
      await runtime.resume(id, { turn });
      await Promise.race([fired, ended]);
      latencyMs[turn] = (probe.firedAtMs[turn] ?? NaN) - calledAt;
      if (quiet) continue;
      if (turn % 1000 === 0) note(`resume: turn ${turn} (${round((nowMs() - t0) / 1000)} s)`);
      if (!checkpoints.includes(turn)) continue;
      const s = latencyStats(latencyMs.subarray(turn - WINDOW + 1, turn + 1));
      stats.set(turn, s);
      const commits = runtime.journal.commits;
      emit({
        name: "resume",
        store: kind,
        mode,
        turn,
        window: WINDOW,
        ...s,
        snapshotsSinceLast: counts.snapshots - mark.snapshots,
        snapshotMsSinceLast: round(counts.snapshotMs - mark.snapshotMs),
        reacquiresSinceLast: counts.acquires - mark.acquires,
        commitsPerTurnSinceLast: round(
          (commits - mark.commits) / (turn - lastOf(checkpoints, turn)),
          2,
        ),
        heapMB: round(process.memoryUsage().heapUsed / 2 ** 20, 1),
      });
      mark = { ...counts, commits };
    }
    if (quiet) return;
    const first = stats.get(checkpoints[0] ?? turns);
    const last = stats.get(turns);
    if (!first || !last) throw new Error("resume: a checkpoint window is missing");
    const flatness = last.p50Us / first.p50Us;
    const summary = {
      name: "resume",
      store: kind,
      mode,
      synchronous,
      turns,
      firstCheckpoint: checkpoints[0] ?? turns,
      p50UsFirst: first.p50Us,
      p50UsLast: last.p50Us,
      flatness: round(flatness),
      flatnessMean: round(last.meanUs / first.meanUs),
      flatnessP99: round(last.p99Us / first.p99Us),
      bodyRuns: probe.bodyRuns,
      snapshots: counts.snapshots,
      snapshotMs: round(counts.snapshotMs),
      leaseAcquires: counts.acquires,
      commits: runtime.journal.commits,
      totalS: round((nowMs() - t0) / 1000),
    };
    emit(
      kind === "memory"
        ? { ...summary, target: "flatness <= 1.5", pass: flatness <= 1.5 }
        : { ...summary, target: null, pass: null },
    );
  } finally {
    await runtime.close();
  }
}

/** The checkpoint before `turn` (0 for the first). */
function lastOf(checkpoints: readonly number[], turn: number): number {
  const i = checkpoints.indexOf(turn);
  return i > 0 ? (checkpoints[i - 1] ?? 0) : 0;
}
