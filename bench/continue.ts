/**
 * `continue`: does `ctx.continueAsNew` keep a long conversation's per-turn cost and state bounded
 * (ADR 0109, "Measured acceptance")?
 *
 * The message loop `for (;;) { msg = await ctx.suspend(); await ctx.run("turn", ...) }` runs
 * twice, each on a fresh store of the same kind and a fresh runtime with `continueAsNew` on:
 * "never" rotates never (the baseline), "every-N" returns `ctx.continueAsNew({ turn, summary })`
 * after every N turns (the turn counter travels in the carry). Each turn is
 * `await runtime.resume(chainId, { turn: k })` addressed to the FIRST id, so every resume after
 * the first rotation is routed to the chain's head; a turn's latency runs from that call to the
 * moment turn k's step function runs (it calls back into this file).
 *
 * On a rotating turn (k a multiple of N) the loop also waits until the generation has committed
 * its EXECUTION_CONTINUED before it sends turn k+1: a resume that reaches the predecessor between
 * its last step and that commit is queued in the predecessor's fold and never answered (found by
 * this bench; see docs/benchmarks.md). So a rotating turn's figure is resume -> step -> continued,
 * and the first turn of a generation (k+1) wakes the parked successor; both are reported apart,
 * and the windows (p50 over the ~100 turns around turn 1,000, the middle and the end) hold the
 * other turns only. A warm-up of both variants on other stores (not counted) runs first.
 */
import { join } from "node:path";
import { createRuntime, flow$, memoryStore, type Runtime } from "../src/index.ts";
import { isTerminalEvent } from "../src/kernel/events.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import type { Store } from "../src/store/spi.ts";
import {
  choiceFlag,
  countingStore,
  emit,
  intFlag,
  latencyStats,
  median,
  note,
  nowMs,
  parseFlags,
  round,
  UsageError,
  withTempDir,
  type Fields,
} from "./lib.ts";

const WINDOW = 100;
const WARM_UP_TURNS = 1000;
/** A turn whose step has not run after this long was lost: fail instead of waiting forever. */
const STALL_MS = 10_000;
const CHAIN_ID = "bench-chat";

interface Carry {
  turn: number;
  summary: string;
}

interface Probe {
  bodyRuns: number;
  firedAtMs: Float64Array;
  waiting: { turn: number; resolve: () => void } | undefined;
}

/** The loop; with `every`, it continues as new after every `every` turns. */
function chatFlow(probe: Probe, every: number | undefined) {
  return flow$("bench-continue", async (ctx, input: Carry | null) => {
    probe.bodyRuns++;
    let turn = input?.turn ?? 0;
    for (;;) {
      const msg = await ctx.suspend<{ turn: number }>();
      const reply = await ctx.run("turn", async () => {
        probe.firedAtMs[msg.turn] = nowMs();
        if (probe.waiting?.turn === msg.turn) probe.waiting.resolve();
        return { turn: msg.turn, text: `reply to turn ${msg.turn}` };
      });
      turn = reply.turn;
      if (every !== undefined && turn % every === 0) {
        return ctx.continueAsNew({ turn, summary: `${turn} turns; last: ${reply.text}` });
      }
    }
  });
}

const genId = (gen: number) => (gen === 0 ? CHAIN_ID : `${CHAIN_ID}~${gen}`);

interface Options {
  kind: "memory" | "sqlite";
  turns: number;
  every: number | undefined;
  snapshotEvery: number;
}

interface Result {
  fields: Fields;
  lastMs: number;
  flatness: number;
  totalMs: number;
  headStateBytes: number;
  headLogEvents: number;
}

/** Inclusive turn ranges of about WINDOW turns: around 1,000, around the middle, the last. */
function windows(turns: number): { label: string; from: number; to: number }[] {
  const around = (center: number) => {
    const from = Math.max(1, Math.min(center - WINDOW / 2 + 1, turns - WINDOW + 1));
    return { from, to: from + WINDOW - 1 };
  };
  return [
    { label: "At1000", ...around(1000) },
    { label: "Middle", ...around(Math.floor(turns / 2)) },
    { label: "Last", from: turns - WINDOW + 1, to: turns },
  ];
}

async function drive(inner: Store, options: Options): Promise<Result> {
  const { turns, every, snapshotEvery } = options;
  const probe: Probe = { bodyRuns: 0, firedAtMs: new Float64Array(turns + 1), waiting: undefined };
  const { store, counts } = countingStore(inner);
  let reads = 0;
  const reading: Store = {
    ...store,
    read: (...a) => (reads++, store.read(...a)),
    head: (...a) => (reads++, store.head(...a)),
  };
  const runtime = createRuntime({
    store: reading,
    features: { continueAsNew: true },
    snapshotEvery,
  });
  const latencyMs = new Float64Array(turns + 1);
  const readsAt = new Float64Array(turns + 1);
  const rotating: number[] = [];
  const rotationMs: number[] = [];
  const firstOfGeneration: number[] = [];
  const variant = every === undefined ? "never" : `every-${every}`;
  let progressAt = nowMs();
  let stalled: (e: Error) => void = () => undefined;
  const stall = new Promise<never>((_, reject) => (stalled = reject));
  stall.catch(() => undefined);
  const watchdog = setInterval(() => {
    if (nowMs() - progressAt > STALL_MS) {
      stalled(new Error(`continue (${variant}): no progress for ${STALL_MS} ms`));
    }
  }, 1000);
  try {
    await runtime.start(chatFlow(probe, every), null, { id: CHAIN_ID });
    const t0 = nowMs();
    for (let turn = 1; turn <= turns; turn++) {
      const fired = new Promise<void>((resolve) => (probe.waiting = { turn, resolve }));
      const readsBefore = reads;
      const calledAt = nowMs();
      await runtime.resume(CHAIN_ID, { turn });
      await Promise.race([fired, stall]);
      latencyMs[turn] = (probe.firedAtMs[turn] ?? NaN) - calledAt;
      readsAt[turn] = reads - readsBefore;
      if (every !== undefined && turn % every === 0) {
        const stepAt = nowMs();
        await Promise.race([continued(inner, genId(turn / every - 1)), stall]);
        rotationMs.push(nowMs() - stepAt);
        rotating.push(nowMs() - calledAt);
      } else if (every !== undefined && turn > every && turn % every === 1) {
        firstOfGeneration.push(latencyMs[turn] ?? NaN);
      }
      progressAt = nowMs();
      if (turn % 2000 === 0) note(`continue ${variant}: turn ${turn} (${round(nowMs() - t0)} ms)`);
    }
    const totalMs = nowMs() - t0;
    return await summarise(runtime, options, {
      latencyMs,
      readsAt,
      rotating,
      rotationMs,
      firstOfGeneration,
      totalMs,
      extra: { variant, bodyRuns: probe.bodyRuns, snapshots: counts.snapshots },
    });
  } finally {
    clearInterval(watchdog);
    await runtime.close();
  }
}

/**
 * Resolves once `id`'s log ends in EXECUTION_CONTINUED: two point reads on the unwrapped store
 * per turn of the event loop (`waitForCompletion` polls every 10 ms, which would be the figure).
 */
async function continued(store: Store, id: string): Promise<void> {
  for (;;) {
    const head = await store.head(id);
    const last = head < 0 ? undefined : (await store.read(id, head, 1))[0];
    if (last?.kind === "EXECUTION_CONTINUED") return;
    if (last && isTerminalEvent(last)) throw new Error(`"${id}" ended ${last.kind}`);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

interface Samples {
  latencyMs: Float64Array;
  readsAt: Float64Array;
  rotating: number[];
  rotationMs: number[];
  firstOfGeneration: number[];
  totalMs: number;
  extra: Fields;
}

async function summarise(runtime: Runtime, options: Options, s: Samples): Promise<Result> {
  const { kind, turns, every, snapshotEvery } = options;
  // Rotating turns and the first turn of each generation are reported apart (see the head).
  const steady = (t: number) => every === undefined || (t % every !== 0 && t % every !== 1);
  const fields: Fields = { name: "continue", variant: String(s.extra.variant), store: kind };
  Object.assign(fields, { turns, every: every ?? null, snapshotEvery, window: WINDOW });
  const p50 = new Map<string, number>();
  for (const w of windows(turns)) {
    const picked: number[] = [];
    let reads = 0;
    for (let t = w.from; t <= w.to; t++) {
      if (!steady(t)) continue;
      picked.push(s.latencyMs[t] ?? NaN);
      reads += s.readsAt[t] ?? 0;
    }
    const stats = latencyStats(picked);
    p50.set(w.label, stats.p50Us);
    fields[`p50Us${w.label}`] = stats.p50Us;
    fields[`p99Us${w.label}`] = stats.p99Us;
    fields[`storeReadsPerTurn${w.label}`] = round(reads / picked.length, 1);
  }
  const us = (ms: number) => round(ms * 1000, 1);
  fields.rotations = s.rotating.length;
  fields.rotatingTurnP50Us = s.rotating.length > 0 ? us(median(s.rotating)) : null;
  fields.rotatingTurnMaxUs = s.rotating.length > 0 ? us(Math.max(...s.rotating)) : null;
  fields.rotationP50Us = s.rotationMs.length > 0 ? us(median(s.rotationMs)) : null;
  const first = s.firstOfGeneration;
  fields.firstTurnOfGenerationP50Us = first.length > 0 ? us(median(first)) : null;
  fields.totalMs = round(s.totalMs);
  const head = await runtime.followToHead(CHAIN_ID);
  const headStateBytes = JSON.stringify(await runtime.getState(head)).length;
  const headLogEvents = (await runtime.readLog(head)).length;
  // The largest state any generation reached: what a rotation bounds.
  let maxGenerationStateBytes = headStateBytes;
  for (let g = 0; every !== undefined && g < Math.floor(turns / every); g++) {
    const bytes = JSON.stringify(await runtime.getState(genId(g))).length;
    maxGenerationStateBytes = Math.max(maxGenerationStateBytes, bytes);
  }
  const flatness = (p50.get("Last") ?? NaN) / (p50.get("At1000") ?? NaN);
  Object.assign(fields, { head, headStateBytes, headLogEvents, maxGenerationStateBytes });
  Object.assign(fields, s.extra, { flatness: round(flatness) });
  fields.heapMB = round(process.memoryUsage().heapUsed / 2 ** 20, 1);
  return {
    fields,
    lastMs: (p50.get("Last") ?? NaN) / 1000,
    flatness,
    totalMs: s.totalMs,
    headStateBytes,
    headLogEvents,
  };
}

export async function continueBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["turns", "every", "store", "snapshot-every", "only"]);
  const turns = intFlag(flags, "turns", 6000);
  const every = intFlag(flags, "every", 500);
  const kind = choiceFlag(flags, "store", ["memory", "sqlite"] as const, "memory");
  const snapshotEvery = intFlag(flags, "snapshot-every", 50);
  const only = choiceFlag(flags, "only", ["both", "never", "rotating"] as const, "both");
  if (turns < 2 * WINDOW) throw new UsageError(`--turns must be at least ${2 * WINDOW}`);
  if (every < 2) throw new UsageError("--every must be at least 2");
  await withTempDir(async (dir) => {
    const open = (file: string) =>
      kind === "memory" ? memoryStore() : sqliteStore(join(dir, `${file}.db`));
    const variants = only === "both" ? [undefined, every] : [only === "never" ? undefined : every];
    note(`continue: warm-up, ${WARM_UP_TURNS} turns per variant on other stores (not counted)`);
    for (const e of variants) {
      const warm = { kind, snapshotEvery, turns: WARM_UP_TURNS, every: e && Math.min(e, 250) };
      await drive(open(`warm-up-${e ?? "never"}`), warm);
    }
    const results: (Result | undefined)[] = [];
    for (const e of variants) {
      note(`continue: ${turns} turns, ${e === undefined ? "never rotating" : `every ${e}`}`);
      const r = await drive(open(`run-${e ?? "never"}`), { kind, turns, every: e, snapshotEvery });
      emit(r.fields);
      results[e === undefined ? 0 : 1] = r;
    }
    const [never, rot] = results;
    // As for `resume`, the target is set on the memory store only: SQLite's figures follow the disk.
    const judged = rot && kind === "memory" ? rot : undefined;
    emit({
      name: "continue",
      store: kind,
      snapshotEvery,
      turns,
      every,
      lastTurnMsNever: never ? round(never.lastMs, 4) : null,
      lastTurnMsRotating: rot ? round(rot.lastMs, 4) : null,
      ratio: never && rot ? round(never.lastMs / rot.lastMs) : null,
      headStateBytesNever: never?.headStateBytes ?? null,
      headStateBytesRotating: rot?.headStateBytes ?? null,
      headLogEventsNever: never?.headLogEvents ?? null,
      headLogEventsRotating: rot?.headLogEvents ?? null,
      totalMsNever: never ? round(never.totalMs) : null,
      totalMsRotating: rot ? round(rot.totalMs) : null,
      flatnessRotating: rot ? round(rot.flatness) : null,
      target: judged ? "rotating p50 at the last window / at turn 1000 <= 1.5" : null,
      pass: judged ? judged.flatness <= 1.5 : null,
    });
  });
}
