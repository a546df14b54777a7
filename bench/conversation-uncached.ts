/**
 * `conversation --uncached`: what a resume of ADR 0109's message loop costs when the body is not
 * cached, the path a resume on another fleet member or after a restart pays (issue 28 item 2).
 *
 * The loop of conversation-flow.ts runs on a memory store. A measured turn is resumed by a
 * runtime whose parked cache holds nothing (`cache: { maxExecutions: 0 }`): the body parked at its
 * suspend was evicted, so the resume loads the state (the latest snapshot plus the log after it),
 * takes the lease, appends the RESUMED and replays the body from the top, each recorded call
 * answered from the fold, until the new turn's step runs. Before each measured resume the bench
 * waits until the head's log ends in the body's next SUSPENDED and the park released the lease
 * (a rotation's EXECUTION_CONTINUED too), so nothing of the previous turn is still running.
 *
 * With `--rotate R` every turn is measured. With `never` a resume replays the whole history, so
 * only samples are: the SAMPLES turns ending at every multiple of SAMPLE_EVERY and at the last
 * turn; the turns between are driven by a runtime that keeps the body (not measured).
 *
 * Per resume: wall ms from calling `runtime.resume` to the new turn's step running, and the
 * process's CPU ms over the same span (`cpu`), split at the body's entry (`load`: reads, fold,
 * lease, RESUMED; `body`: the replay). Rotating: the median over each generation's turns, the
 * first and last generations' and their ratio (`generationFlatness`), and the worst generation's.
 * Without rotation: the median of the samples at each point (`perResumeMsByTurn`).
 *
 * Baselines, measured in the same run: `parkedPerResumeMs`, the same loop and waits with the body
 * kept in the parked cache (only the eviction differs); `foldMsLargestGeneration`, the fold of the
 * largest generation's whole log from nothing (the floor of a state reload without snapshots);
 * and the seed's figure, 4.6 ms per resume at 6,000 turns without rotation (ADR 0109's table).
 * Target (rotating): generationFlatness <= 1.5 and every generation's median below 4.6 ms.
 */
import { createRuntime, foldAll, memoryStore, type Runtime } from "../src/index.ts";
import { isTerminalEvent } from "../src/kernel/events.ts";
import type { Store } from "../src/store/spi.ts";
import {
  chatFlow,
  CHAIN_ID,
  continued,
  genId,
  generationOf,
  lastEvent,
  newProbe,
  type Config,
} from "./conversation-flow.ts";
import {
  countingStore,
  cpuMs,
  emit,
  intFlag,
  median,
  note,
  nowMs,
  parseFlags,
  round,
  UsageError,
  type Fields,
} from "./lib.ts";

const SEED_PER_RESUME_MS = 4.6;
const TARGET_GENERATION_FLATNESS = 1.5;
/** Without rotation: a sample point every this many turns, and at the last. */
const SAMPLE_EVERY = 1000;
/** Without rotation: uncached resumes per sample point (the turns ending at it). */
const SAMPLES = 5;
const STALL_MS = 60_000;
const FOLD_RUNS = 5;
const DEFAULT_CONFIGS: readonly Config[] = [1000, 6000, 20000].flatMap((turns) => [
  { turns, rotate: undefined },
  { turns, rotate: 500 },
]);

interface Measured {
  turns: number[];
  wallMs: Float64Array;
  cpuMs: Float64Array;
  loadMs: Float64Array;
  totalMs: number;
  bodyRuns: number;
  maxGenerationStateBytes: number;
  largestGeneration: string;
  /** The fold of the largest generation's whole log from nothing, median of FOLD_RUNS. */
  foldMs: number;
}

/** The turns measured: all when rotating, else the samples. */
function measuredTurns({ turns, rotate }: Config): Set<number> {
  const out = new Set<number>();
  if (rotate !== undefined) {
    for (let t = 1; t <= turns; t++) out.add(t);
    return out;
  }
  const points = [];
  for (let p = SAMPLE_EVERY; p <= turns; p += SAMPLE_EVERY) points.push(p);
  if (points[points.length - 1] !== turns) points.push(turns);
  for (const p of points) for (let t = Math.max(1, p - SAMPLES + 1); t <= p; t++) out.add(t);
  return out;
}

/** Waits until `head`'s log ends in SUSPENDED and a lease was released after `releases`. */
async function quiet(
  store: Store,
  head: string,
  released: () => number,
  releases: number,
): Promise<void> {
  const since = nowMs();
  for (;;) {
    const last = await lastEvent(store, head);
    if (last?.kind === "SUSPENDED" && released() > releases) break;
    if (last && isTerminalEvent(last)) throw new Error(`"${head}" ended ${last.kind}`);
    if (nowMs() - since > STALL_MS) throw new Error(`conversation --uncached: "${head}" stalled`);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Drives `config` on a fresh memory store; measured turns resumed with the body `evicted` or not. */
async function drive(config: Config, evicted: boolean, label: string): Promise<Measured> {
  const { turns, rotate } = config;
  const measured = measuredTurns(config);
  const inner = memoryStore();
  const { store, counts } = countingStore(inner);
  const kept: Store = { ...store, close: async () => undefined };
  const probe = newProbe(turns);
  const flow = chatFlow(probe, rotate);
  let runtime: Runtime | undefined;
  let cold = false;
  const use = async (wantCold: boolean): Promise<Runtime> => {
    if (runtime && cold === wantCold) return runtime;
    await runtime?.close();
    const cache = wantCold ? { maxExecutions: 0 } : undefined;
    runtime = createRuntime({
      store: kept,
      features: { continueAsNew: true },
      snapshotEvery: 50,
      cache,
    });
    runtime.registerFlow(flow);
    cold = wantCold;
    return runtime;
  };
  const wallMs = new Float64Array(turns + 1);
  const cpu = new Float64Array(turns + 1);
  const loadMs = new Float64Array(turns + 1);
  const released = () => counts.releases;
  try {
    await (await use(evicted && measured.has(1))).start(flow, null, { id: CHAIN_ID });
    await quiet(inner, genId(0), released, 0);
    const t0 = nowMs();
    for (let turn = 1; turn <= turns; turn++) {
      const rt = await use(evicted && measured.has(turn));
      const fired = new Promise<void>((resolve) => (probe.waiting = { turn, resolve }));
      const runsBefore = probe.bodyRuns;
      const releases = counts.releases;
      const c0 = cpuMs();
      const calledAt = nowMs();
      await rt.resume(CHAIN_ID, { turn });
      await fired;
      wallMs[turn] = (probe.firedAtMs[turn] ?? NaN) - calledAt;
      cpu[turn] = (probe.firedCpuMs[turn] ?? NaN) - c0;
      loadMs[turn] = probe.bodyRuns > runsBefore ? probe.bodyAtMs - calledAt : NaN;
      if (rotate !== undefined && turn % rotate === 0) {
        await continued(inner, genId(turn / rotate - 1));
      }
      await quiet(
        inner,
        genId(rotate === undefined ? 0 : Math.floor(turn / rotate)),
        released,
        releases,
      );
      if (turn % 5000 === 0)
        note(`conversation ${label}: turn ${turn} (${round(nowMs() - t0)} ms)`);
    }
    const totalMs = nowMs() - t0;
    const last = runtime ?? (await use(false));
    let maxGenerationStateBytes = 0;
    let largestGeneration = genId(0);
    for (let g = 0; g <= generationOf(turns + 1, rotate); g++) {
      const bytes = JSON.stringify(await last.getState(genId(g))).length;
      if (bytes > maxGenerationStateBytes) {
        maxGenerationStateBytes = bytes;
        largestGeneration = genId(g);
      }
    }
    const log = await last.readLog(largestGeneration);
    const folds: number[] = [];
    for (let i = 0; i < FOLD_RUNS; i++) {
      const f0 = nowMs();
      foldAll(log);
      folds.push(nowMs() - f0);
    }
    return {
      turns: [...measured].sort((a, b) => a - b),
      wallMs,
      cpuMs: cpu,
      loadMs,
      totalMs,
      bodyRuns: probe.bodyRuns,
      maxGenerationStateBytes,
      largestGeneration,
      foldMs: median(folds),
    };
  } finally {
    await runtime?.close();
  }
}

const ms = (x: number) => round(x, 3);
const at = (xs: Float64Array, turns: readonly number[]) => turns.map((t) => xs[t] ?? NaN);

/** The measured turns by generation (rotating) or by sample point (never). */
function groups(config: Config, turns: readonly number[]): Map<number, number[]> {
  const out = new Map<number, number[]>();
  for (const t of turns) {
    const key =
      config.rotate === undefined
        ? Math.min(config.turns, Math.ceil(t / SAMPLE_EVERY) * SAMPLE_EVERY)
        : generationOf(t, config.rotate);
    const list = out.get(key) ?? [];
    list.push(t);
    out.set(key, list);
  }
  return out;
}

function summarise(config: Config, r: Measured, parked: Measured): Fields {
  const { turns, rotate } = config;
  const byGroup = groups(config, r.turns);
  const medians = new Map([...byGroup].map(([k, ts]) => [k, median(at(r.wallMs, ts))]));
  const keys = [...byGroup.keys()];
  const firstKey = keys[0] ?? 0;
  const lastKey = keys[keys.length - 1] ?? 0;
  const lastTurns = byGroup.get(lastKey) ?? [];
  const perResumeMsFirst = medians.get(firstKey) ?? NaN;
  const perResumeMsLast = medians.get(lastKey) ?? NaN;
  const worst = Math.max(...medians.values());
  const fields: Fields = {
    name: "conversation",
    mode: "uncached",
    turns,
    rotate: rotate ?? "never",
    store: "memory",
    perResumeMs: ms(median(at(r.wallMs, r.turns))),
    perResumeMsFirst: ms(perResumeMsFirst),
    perResumeMsLast: ms(perResumeMsLast),
    growth: round(perResumeMsLast / perResumeMsFirst),
    perResumeMsWorst: ms(worst),
    perResumeMsMax: ms(Math.max(...at(r.wallMs, r.turns))),
    cpuMsLast: ms(median(at(r.cpuMs, lastTurns))),
    loadMsLast: ms(median(at(r.loadMs, lastTurns))),
    bodyMsLast: ms(median(lastTurns.map((t) => (r.wallMs[t] ?? NaN) - (r.loadMs[t] ?? NaN)))),
    perResumeMsBy: Object.fromEntries([...medians].map(([k, v]) => [String(k), ms(v)])),
    by: rotate === undefined ? "turn" : "generation",
    parkedPerResumeMs: ms(median(at(parked.wallMs, parked.turns))),
    parkedPerResumeMsLast: ms(
      median(at(parked.wallMs, groups(config, parked.turns).get(lastKey) ?? [])),
    ),
    foldMsLargestGeneration: ms(r.foldMs),
    seedPerResumeMs: SEED_PER_RESUME_MS,
    totalMs: round(r.totalMs),
    maxGenerationStateBytes: r.maxGenerationStateBytes,
    largestGeneration: r.largestGeneration,
    bodyRuns: r.bodyRuns,
    measuredTurns: r.turns.length,
    heapMB: round(process.memoryUsage().heapUsed / 2 ** 20, 1),
  };
  if (rotate === undefined) return { ...fields, target: null, pass: null };
  const target = `perResumeMsLast / perResumeMsFirst (by generation) <= ${TARGET_GENERATION_FLATNESS}, every generation's median < ${SEED_PER_RESUME_MS} ms`;
  const pass =
    perResumeMsLast / perResumeMsFirst <= TARGET_GENERATION_FLATNESS && worst < SEED_PER_RESUME_MS;
  return { ...fields, target, pass };
}

export async function conversationUncachedBench(argv: readonly string[]): Promise<void> {
  // `--uncached` is the mode's switch and takes no value.
  const flags = parseFlags(
    argv.filter((a) => a !== "--uncached"),
    ["turns", "rotate", "store"],
  );
  if ((flags.get("store") ?? "memory") !== "memory") {
    throw new UsageError("conversation --uncached runs on the memory store only");
  }
  const rotateOf = (raw: string | undefined) => {
    if (raw === undefined) return 500;
    if (raw.toLowerCase() === "never") return undefined;
    const n = intFlag(flags, "rotate", 500);
    if (n < 2) throw new UsageError("--rotate must be at least 2, or never");
    return n;
  };
  const configs: readonly Config[] =
    flags.has("turns") || flags.has("rotate")
      ? [{ turns: intFlag(flags, "turns", 6000), rotate: rotateOf(flags.get("rotate")) }]
      : DEFAULT_CONFIGS;
  note("conversation --uncached: warm-up, 1,000 turns rotating every 100 (not counted)");
  await drive({ turns: 1000, rotate: 100 }, true, "warm-up");
  for (const c of configs) {
    const label = `--uncached ${c.turns} turns, rotate ${c.rotate ?? "never"}`;
    note(`conversation ${label}: body kept (baseline)`);
    const parked = await drive(c, false, `${label}, kept`);
    note(`conversation ${label}: body evicted before every measured resume`);
    emit(summarise(c, await drive(c, true, label), parked));
  }
}
