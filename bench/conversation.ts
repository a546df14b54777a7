/**
 * `conversation`: does `ctx.continueAsNew` keep a long conversation's per-resume cost and state
 * bounded (ADR 0109, "Measured acceptance")? One JSON line per configuration (turns, rotate);
 * with neither --turns nor --rotate, the ADR's three rows.
 *
 * The message loop `for (;;) { msg = await ctx.suspend(); await ctx.run("turn", ...) }` runs on
 * a fresh store and a fresh runtime with `continueAsNew` on and `snapshotEvery` 50 (the ADR's
 * setting). With `--rotate R` the body returns `ctx.continueAsNew({ turn, summary })` after
 * every R turns (the turn counter travels in the carry); `never` is the unbounded baseline.
 * Each turn is `await runtime.resume(chainId, { turn: k })` addressed to the chain's FIRST id,
 * so after the first rotation every resume is routed to the head, as a client that kept the id
 * it started with would do.
 *
 * "Per resume" is what a caller waits for before the turn's work happens: the time from calling
 * `runtime.resume` to the moment turn k's step function runs (it calls back into this file).
 * It holds the routing, the durable RESUMED (in the same group commit as the previous turn's
 * STEP_COMPLETED: the run is still active when the next resume comes, so no lease is taken
 * back), the body's wake, its next SUSPENDED's commit and the step's start. `resumeCallMs*` is
 * the resume call's own latency (to the RESUMED's commit), for comparison. The loop does not
 * wait for a rotation: a resume that reaches a generation while it rotates is routed on by the
 * runtime (or queued in its fold and carried to the successor), so the first turn of each new
 * generation (k % R === 1, k > R) pays the rotation; those turns are reported apart
 * (`rotationTurnMs`) and the windows hold the others.
 *
 * perResumeMsAt1000 is the median over the WINDOW turns centred on turn 1,000, perResumeMsLast
 * the median over the last WINDOW turns, and flatness their ratio. totalMs runs from the first
 * resume to the last turn's step. The head's state and log are read once the last rotation has
 * committed. Baseline, measured in the same run: the same loop on a plain execution (chains off,
 * addressed by its own id, never rotating), the median of BASELINE_RUNS runs' medians over the
 * turns around 1,000 (`baselinePerResumeMs`). A warm-up (not counted) runs first.
 * Targets (memory store, rotating): flatness <= 1.2, head state <= 90 KB, the largest
 * generation's state <= 86,000 bytes (ADR 0109's "at most 86 KB", issue 28), <= 0.03 ms per
 * resume in both windows; 20,000 turns rotating every 500 in <= 1.2 s.
 *
 * `--uncached` is the other path a resume takes: the body evicted before every resume, so each
 * resume reloads the state and replays the body (conversation-uncached.ts).
 */
import { join } from "node:path";
import { createRuntime, memoryStore } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import type { Store } from "../src/store/spi.ts";
import {
  chatFlow,
  CHAIN_ID,
  continued,
  genId,
  newProbe,
  type Config,
} from "./conversation-flow.ts";
import { conversationUncachedBench } from "./conversation-uncached.ts";
import {
  choiceFlag,
  countingStore,
  emit,
  intFlag,
  median,
  note,
  nowMs,
  parseFlags,
  round,
  UsageError,
  withTempDir,
  type Fields,
} from "./lib.ts";

const WINDOW = 200;
const WARM_UP_TURNS = 3000;
/** Turns of a baseline run: enough to cover the window around turn 1,000. */
const BASELINE_TURNS = 1100;
/** Baseline runs; the baseline is their median (one short run is at the mercy of a GC). */
const BASELINE_RUNS = 3;
/** A turn whose step has not run after this long was lost: fail instead of waiting forever. */
const STALL_MS = 10_000;
/** The ADR's three rows, run when neither --turns nor --rotate is given. */
const DEFAULT_CONFIGS: readonly Config[] = [
  { turns: 6000, rotate: undefined },
  { turns: 6000, rotate: 500 },
  { turns: 20000, rotate: 500 },
];
const TARGET_FLATNESS = 1.2;
const TARGET_HEAD_STATE_BYTES = 90 * 1024;
/** ADR 0109's largest generation (issue 28): at most 86 KB of state. */
const TARGET_GENERATION_STATE_BYTES = 86_000;
const TARGET_PER_RESUME_MS = 0.03;
const TARGET_TOTAL_MS_20K = 1200;

/** Inclusive turn range of WINDOW turns centred on `center`, inside 1..turns. */
function around(center: number, turns: number): { from: number; to: number } {
  const from = Math.max(1, Math.min(center - WINDOW / 2 + 1, turns - WINDOW + 1));
  return { from, to: from + WINDOW - 1 };
}

interface Measured {
  latencyMs: Float64Array;
  callMs: Float64Array;
  readsAt: Float64Array;
  totalMs: number;
  bodyRuns: number;
  snapshots: number;
  headStateBytes: number;
  headLogEvents: number;
  head: string;
  maxGenerationStateBytes: number;
}

/** Drives `turns` turns on `inner`; `chains` false is the plain baseline (addressed directly). */
async function drive(
  inner: Store,
  config: Config,
  chains: boolean,
  label: string,
): Promise<Measured> {
  const { turns, rotate } = config;
  const probe = newProbe(turns);
  const { store, counts } = countingStore(inner);
  let reads = 0;
  const reading: Store = {
    ...store,
    read: (...a) => (reads++, store.read(...a)),
    head: (...a) => (reads++, store.head(...a)),
    loadSnapshot: (...a) => (reads++, store.loadSnapshot(...a)),
  };
  const runtime = createRuntime({
    store: reading,
    features: { continueAsNew: chains },
    snapshotEvery: 50,
  });
  const latencyMs = new Float64Array(turns + 1);
  const callMs = new Float64Array(turns + 1);
  const readsAt = new Float64Array(turns + 1);
  let progressAt = nowMs();
  let stalled: (e: Error) => void = () => undefined;
  const stall = new Promise<never>((_, reject) => (stalled = reject));
  stall.catch(() => undefined);
  const watchdog = setInterval(() => {
    if (nowMs() - progressAt > STALL_MS) {
      stalled(new Error(`conversation (${label}): no progress for ${STALL_MS} ms`));
    }
  }, 1000);
  try {
    await runtime.start(chatFlow(probe, rotate), null, { id: CHAIN_ID });
    const t0 = nowMs();
    for (let turn = 1; turn <= turns; turn++) {
      const fired = new Promise<void>((resolve) => (probe.waiting = { turn, resolve }));
      const readsBefore = reads;
      const calledAt = nowMs();
      await runtime.resume(CHAIN_ID, { turn });
      callMs[turn] = nowMs() - calledAt;
      await Promise.race([fired, stall]);
      latencyMs[turn] = (probe.firedAtMs[turn] ?? NaN) - calledAt;
      readsAt[turn] = reads - readsBefore;
      progressAt = nowMs();
      if (turn % 5000 === 0)
        note(`conversation ${label}: turn ${turn} (${round(nowMs() - t0)} ms)`);
    }
    const totalMs = nowMs() - t0;
    // The last turn may rotate: read the head once that rotation committed (not counted).
    if (rotate !== undefined && turns % rotate === 0) {
      await Promise.race([continued(inner, genId(turns / rotate - 1)), stall]);
    }
    const head = await runtime.followToHead(CHAIN_ID);
    const headStateBytes = JSON.stringify(await runtime.getState(head)).length;
    const headLogEvents = (await runtime.readLog(head)).length;
    // The largest state a generation reached: what a rotation bounds.
    let maxGenerationStateBytes = headStateBytes;
    for (let g = 0; rotate !== undefined && g < Math.floor(turns / rotate); g++) {
      const bytes = JSON.stringify(await runtime.getState(genId(g))).length;
      maxGenerationStateBytes = Math.max(maxGenerationStateBytes, bytes);
    }
    return {
      latencyMs,
      callMs,
      readsAt,
      totalMs,
      bodyRuns: probe.bodyRuns,
      snapshots: counts.snapshots,
      headStateBytes,
      headLogEvents,
      head,
      maxGenerationStateBytes,
    };
  } finally {
    clearInterval(watchdog);
    await runtime.close();
  }
}

/** The turns of `range` that are not the first of a generation (those pay the rotation). */
function steadyTurns(range: { from: number; to: number }, rotate: number | undefined): number[] {
  const out: number[] = [];
  for (let t = range.from; t <= range.to; t++) {
    if (rotate === undefined || t <= rotate || t % rotate !== 1) out.push(t);
  }
  return out;
}

const pick = (xs: Float64Array, turns: readonly number[]) => turns.map((t) => xs[t] ?? NaN);

function summarise(
  config: Config,
  kind: string,
  r: Measured,
  baseline: { perResumeMs: number; totalMs: number },
): Fields {
  const { turns, rotate } = config;
  const at1000 = steadyTurns(around(1000, turns), rotate);
  const last = steadyTurns({ from: turns - WINDOW + 1, to: turns }, rotate);
  const perResumeMsAt1000 = median(pick(r.latencyMs, at1000));
  const perResumeMsLast = median(pick(r.latencyMs, last));
  const flatness = perResumeMsLast / perResumeMsAt1000;
  const rotationTurns: number[] = [];
  for (let t = (rotate ?? turns) + 1; rotate !== undefined && t <= turns; t += rotate) {
    rotationTurns.push(t);
  }
  const readsLast = pick(r.readsAt, last).reduce((s, x) => s + x, 0) / last.length;
  const ms = (x: number) => round(x, 4);
  const fields: Fields = {
    name: "conversation",
    turns,
    rotate: rotate ?? "never",
    store: kind,
    perResumeMsAt1000: ms(perResumeMsAt1000),
    perResumeMsLast: ms(perResumeMsLast),
    totalMs: round(r.totalMs),
    headStateBytes: r.headStateBytes,
    headLogEvents: r.headLogEvents,
    flatness: round(flatness),
    baselinePerResumeMs: ms(baseline.perResumeMs),
    baselineTotalMsFor1100Turns: round(baseline.totalMs),
    resumeCallMsAt1000: ms(median(pick(r.callMs, at1000))),
    resumeCallMsLast: ms(median(pick(r.callMs, last))),
    rotations: rotate === undefined ? 0 : Math.floor(turns / rotate),
    rotationTurnMs: rotationTurns.length > 0 ? ms(median(pick(r.latencyMs, rotationTurns))) : null,
    rotationTurnMaxMs:
      rotationTurns.length > 0 ? ms(Math.max(...pick(r.latencyMs, rotationTurns))) : null,
    storeReadsPerResumeLast: round(readsLast, 1),
    head: r.head,
    maxGenerationStateBytes: r.maxGenerationStateBytes,
    // The ADR's "at most 86 KB (one generation)" is about this figure, not the head at the end.
    maxGenerationStateWithin86000:
      rotate === undefined ? null : r.maxGenerationStateBytes <= TARGET_GENERATION_STATE_BYTES,
    bodyRuns: r.bodyRuns,
    snapshots: r.snapshots,
    window: WINDOW,
    heapMB: round(process.memoryUsage().heapUsed / 2 ** 20, 1),
  };
  if (kind !== "memory" || rotate === undefined) {
    // SQLite's figures follow the disk, and `never` is the unbounded baseline: no target.
    return { ...fields, target: null, pass: null };
  }
  const adrRow = turns === 20000 && rotate === 500;
  const checks = [
    flatness <= TARGET_FLATNESS,
    r.headStateBytes <= TARGET_HEAD_STATE_BYTES,
    r.maxGenerationStateBytes <= TARGET_GENERATION_STATE_BYTES,
    perResumeMsAt1000 <= TARGET_PER_RESUME_MS && perResumeMsLast <= TARGET_PER_RESUME_MS,
    !adrRow || r.totalMs <= TARGET_TOTAL_MS_20K,
  ];
  const target =
    `flatness <= ${TARGET_FLATNESS}, head state at the end <= 90 KB, largest generation's state <= ${TARGET_GENERATION_STATE_BYTES} bytes, per resume <= ${TARGET_PER_RESUME_MS} ms` +
    (adrRow ? `, total <= ${TARGET_TOTAL_MS_20K} ms` : "");
  return { ...fields, target, pass: checks.every(Boolean) };
}

/** `--rotate R|never`. */
function rotateFlag(flags: Map<string, string>): number | undefined {
  const raw = flags.get("rotate");
  if (raw === undefined || raw.toLowerCase() === "never") return undefined;
  const n = intFlag(flags, "rotate", 500);
  if (n < 2) throw new UsageError("--rotate must be at least 2, or never");
  return n;
}

export async function conversationBench(argv: readonly string[]): Promise<void> {
  if (argv.includes("--uncached")) return conversationUncachedBench(argv);
  const flags = parseFlags(argv, ["turns", "rotate", "store"]);
  const kind = choiceFlag(flags, "store", ["memory", "sqlite"] as const, "memory");
  const configs: readonly Config[] =
    flags.has("turns") || flags.has("rotate")
      ? [
          {
            turns: intFlag(flags, "turns", 6000),
            rotate: flags.has("rotate") ? rotateFlag(flags) : 500,
          },
        ]
      : DEFAULT_CONFIGS;
  for (const c of configs) {
    if (c.turns < 1000 + WINDOW / 2) {
      throw new UsageError(`--turns must be at least ${1000 + WINDOW / 2}`);
    }
  }
  await withTempDir(async (dir) => {
    let files = 0;
    const open = () =>
      kind === "memory" ? memoryStore() : sqliteStore(join(dir, `run-${files++}.db`));
    note(`conversation: warm-up, ${WARM_UP_TURNS} turns never and rotating (not counted)`);
    await drive(open(), { turns: WARM_UP_TURNS, rotate: undefined }, true, "warm-up never");
    await drive(open(), { turns: WARM_UP_TURNS, rotate: 100 }, true, "warm-up rotating");
    await drive(open(), { turns: WARM_UP_TURNS, rotate: undefined }, false, "warm-up plain");
    note(`conversation: baseline, ${BASELINE_RUNS} x ${BASELINE_TURNS} turns on a plain execution`);
    const perResume: number[] = [];
    const totals: number[] = [];
    for (let i = 0; i < BASELINE_RUNS; i++) {
      const plain = await drive(
        open(),
        { turns: BASELINE_TURNS, rotate: undefined },
        false,
        "plain",
      );
      perResume.push(
        median(pick(plain.latencyMs, steadyTurns(around(1000, BASELINE_TURNS), undefined))),
      );
      totals.push(plain.totalMs);
    }
    const baseline = { perResumeMs: median(perResume), totalMs: median(totals) };
    for (const c of configs) {
      const label = `${c.turns} turns, rotate ${c.rotate ?? "never"}`;
      note(`conversation: ${label}`);
      emit(summarise(c, kind, await drive(open(), c, true, label), baseline));
    }
  });
}
