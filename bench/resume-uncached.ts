/**
 * `resume --uncached`: what a replay costs per recorded event. A resume that finds no cached
 * body (after an eviction, a restart, or on another fleet member) takes the lease, loads the
 * state as every uncached load does (the latest snapshot plus the log after it, load-state.ts),
 * appends the RESUMED, and re-runs the body from the top, each recorded call answered from the
 * fold (R2), until the body reaches the live suspend and runs the new turn's step.
 *
 * The execution is bench/resume.ts's message loop (per turn a suspend answered by a resume and a
 * step: three events) on SQLite, driven hot to 1,000, 6,000 and 20,000 turns, with snapshots at
 * the runtime's default policy. At each size, every round opens a fresh store and runtime on the
 * file (a restart: nothing cached, SQLite's page cache cold, the JIT warm; the connection's first
 * write, which makes the WAL's files, is done before the clock starts) and times one resume, from
 * the call to the moment the new turn's step runs; the first round is a warm-up, not counted.
 * Figures are medians over the rounds, per event of the log at the resume (`cpuUsPerEvent`,
 * `wallUsPerEvent`). The split: `load*` (call to the body's entry: lease, reads, fold, the
 * RESUMED's append) and `body*` (the body re-run over its recorded calls) in the resume itself;
 * then, timed alone in the same round: `storeRead` (snapshot and tail read and decoded by the
 * store), `read` and `parse` (the same rows read by better-sqlite3, then JSON.parse'd), `fold`
 * (the tail folded onto the snapshot). The baseline, same round: every row of the log read with
 * better-sqlite3 and each payload and meta JSON.parse'd, the floor for "read the log".
 */
import Database from "better-sqlite3";
import { join } from "node:path";
import { createRuntime, flow$ } from "../src/index.ts";
import { foldOnto } from "../src/fold/fold.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { snapshotText } from "../src/store/sqlite/snapshots.ts";
import type { Store } from "../src/store/spi.ts";
import {
  choiceFlag,
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
  withTempDir,
} from "./lib.ts";

const SIZES = [1000, 6000, 20000];
const TARGET_US = 4;
const TARGET_TURNS = 6000;
const ID = "bench-replay";

interface Marks {
  /** The body's entry: wall ms and CPU ms. */
  bodyAt: [number, number];
  /** The live turn's step: wall ms and CPU ms. */
  firedAt: [number, number];
  bodyRuns: number;
  waitFor: number;
  fired: (() => void) | undefined;
}

function replayFlow(m: Marks) {
  return flow$("bench-replay", async (ctx) => {
    m.bodyRuns++;
    m.bodyAt = [nowMs(), cpuMs()];
    for (;;) {
      const msg = await ctx.suspend<{ turn: number }>();
      await ctx.run("turn", async () => {
        if (msg.turn === m.waitFor) {
          m.firedAt = [nowMs(), cpuMs()];
          m.fired?.();
        }
        return msg;
      });
    }
  });
}

const newMarks = (): Marks => ({
  bodyAt: [NaN, NaN],
  firedAt: [NaN, NaN],
  bodyRuns: 0,
  waitFor: -1,
  fired: undefined,
});

export async function resumeUncachedBench(argv: readonly string[]): Promise<void> {
  // `--uncached` is the mode's switch and takes no value.
  const rest = argv.filter((a) => a !== "--uncached");
  const flags = parseFlags(rest, ["turns", "rounds", "synchronous"]);
  const sizes = flags.has("turns") ? [intFlag(flags, "turns", 6000)] : SIZES;
  const rounds = intFlag(flags, "rounds", 5);
  const synchronous = choiceFlag(flags, "synchronous", ["FULL", "NORMAL"] as const, "NORMAL");
  if (rounds < 1) throw new UsageError("--rounds must be at least 1");
  await withTempDir(async (dir) => {
    const file = join(dir, "replay.db");
    let turn = 0;
    const summaries: Record<string, number> = {};
    for (const size of sizes) {
      note(`resume --uncached: driving the execution to ${size} turns`);
      turn = await driveTo(file, synchronous, turn, size);
      const samples: Sample[] = [];
      for (let r = 0; r <= rounds; r++) {
        turn++;
        const s = await replayOnce(file, synchronous, turn);
        if (r > 0) samples.push(s);
      }
      const row = summarize(size, samples);
      summaries[size] = row.cpuUsPerEvent;
      emit({ name: "resume", mode: "uncached", store: "sqlite", synchronous, ...row });
    }
    const at = summaries[TARGET_TURNS];
    emit({
      name: "resume",
      mode: "uncached",
      store: "sqlite",
      synchronous,
      rounds,
      cpuUsPerEvent: Object.fromEntries(Object.entries(summaries)),
      target: `cpuUsPerEvent <= ${TARGET_US} at ${TARGET_TURNS} turns`,
      pass: at === undefined ? null : at <= TARGET_US,
    });
  });
}

/** Resumes the execution hot from turn `from` + 1 through `to`; returns `to`. */
async function driveTo(file: string, synchronous: string, from: number, to: number) {
  const m = newMarks();
  const counting = countingStore(sqliteStore(file, { synchronous: sync(synchronous) }));
  const runtime = createRuntime({ store: counting.store });
  try {
    const flow = replayFlow(m);
    if (from === 0) await runtime.start(flow, undefined, { id: ID });
    else runtime.registerFlow(flow);
    for (let t = from + 1; t <= to; t++) {
      m.waitFor = t;
      const fired = new Promise<void>((resolve) => (m.fired = resolve));
      await runtime.resume(ID, { turn: t });
      await fired;
    }
    await parked(counting);
  } finally {
    await runtime.close();
  }
  return to;
}

/** Waits for the run's release of its lease as it parks, so the next owner need not wait. */
async function parked(counting: ReturnType<typeof countingStore>): Promise<void> {
  if (counting.counts.releases === 0) {
    await new Promise<void>((resolve) => (counting.onRelease = resolve));
  }
  await new Promise<void>((resolve) => setImmediate(resolve));
}

const sync = (s: string) => (s === "FULL" ? "FULL" : "NORMAL");

interface Sample {
  events: number;
  wallMs: number;
  cpuMs: number;
  loadWallMs: number;
  loadCpuMs: number;
  bodyWallMs: number;
  bodyCpuMs: number;
  bodyRuns: number;
  /** The store's part alone: snapshot and tail read (decoded), and their fold. */
  storeReadMs: number;
  foldMs: number;
  snapshotSeq: number;
  /** What loadState reads (the snapshot's row and the tail's), read raw, then parsed. */
  loadReadMs: number;
  loadParseMs: number;
  /** The baseline: the whole log's rows read raw, and their payloads and metas parsed. */
  rawReadMs: number;
  rawParseMs: number;
}

/** One uncached resume on a fresh store and runtime (a restart), then its parts alone. */
async function replayOnce(file: string, synchronous: string, turn: number): Promise<Sample> {
  const m = newMarks();
  m.waitFor = turn;
  const inner = sqliteStore(file, { synchronous: sync(synchronous) });
  const counting = countingStore(inner);
  const runtime = createRuntime({ store: counting.store });
  let sample: Pick<Sample, "events" | "wallMs" | "cpuMs" | "bodyRuns"> &
    Pick<Sample, "loadWallMs" | "loadCpuMs" | "bodyWallMs" | "bodyCpuMs">;
  try {
    runtime.registerFlow(replayFlow(m));
    const events = (await inner.head(ID)) + 1;
    // A connection's first write makes the WAL's files (~5 ms): a cost of opening the file, not
    // of the replay, paid here on another id. The page cache stays cold.
    const warm = await inner.acquireLease("bench-warm", "bench", {
      ttlMs: 1000,
      nowMs: Date.now(),
    });
    if (warm) await inner.releaseLease("bench-warm", "bench", warm.fence);
    const fired = new Promise<void>((resolve) => (m.fired = resolve));
    const w0 = nowMs();
    const c0 = cpuMs();
    await runtime.resume(ID, { turn });
    await fired;
    sample = {
      events,
      wallMs: m.firedAt[0] - w0,
      cpuMs: m.firedAt[1] - c0,
      loadWallMs: m.bodyAt[0] - w0,
      loadCpuMs: m.bodyAt[1] - c0,
      bodyWallMs: m.firedAt[0] - m.bodyAt[0],
      bodyCpuMs: m.firedAt[1] - m.bodyAt[1],
      bodyRuns: m.bodyRuns,
    };
    await parked(counting);
  } finally {
    await runtime.close();
  }
  const parts = await storeParts(file, synchronous);
  return { ...sample, ...parts, ...rawParts(file, parts.snapshotSeq) };
}

/** What loadState does, timed by part, on a fresh store. */
async function storeParts(file: string, synchronous: string) {
  const store: Store = sqliteStore(file, { synchronous: sync(synchronous) });
  try {
    const t0 = nowMs();
    const snapshot = await store.loadSnapshot(ID);
    const tail = await store.read(ID, snapshot ? snapshot.seq + 1 : 0);
    const t1 = nowMs();
    foldOnto(tail, snapshot?.state, ID);
    const t2 = nowMs();
    return { storeReadMs: t1 - t0, foldMs: t2 - t1, snapshotSeq: snapshot?.seq ?? -1 };
  } finally {
    await store.close();
  }
}

/** The log's rows as the store keeps them (migration 6: keyed by the execution's integer `n`). */
const LOG_ROWS = `SELECT seq, kind, at, payload, meta FROM events
    WHERE x = (SELECT n FROM executions WHERE id = @id) AND seq >= @from
  UNION ALL SELECT seq, kind, at, payload, meta FROM events_hot
    WHERE x = (SELECT n FROM executions WHERE id = @id) AND seq >= @from
  ORDER BY seq`;

interface RawRow {
  payload: string;
  /** A meta's JSON text, or a bare fence (row-codec.ts). */
  meta: string | number | null;
}

/**
 * better-sqlite3 alone: the rows loadState reads (the snapshot's and the tail's), then their
 * JSON.parse; and the baseline, every row of the log read, then parsed.
 */
function rawParts(file: string, snapshotSeq: number) {
  const db = new Database(file, { readonly: true });
  try {
    const rows = db.prepare<{ id: string; from: number }, RawRow>(LOG_ROWS);
    const snap = db.prepare<[string], { state: string | Buffer }>(
      "SELECT state FROM snapshots WHERE execution_id = ?",
    );
    const parse = (all: readonly RawRow[]) => {
      let n = 0;
      for (const r of all) {
        n += JSON.parse(r.payload) === null ? 0 : 1;
        if (typeof r.meta === "string") n += JSON.parse(r.meta) === null ? 0 : 1;
      }
      return n;
    };
    const t0 = nowMs();
    const state = snapshotSeq >= 0 ? snap.get(ID)?.state : undefined;
    const tail = rows.all({ id: ID, from: snapshotSeq + 1 });
    const t1 = nowMs();
    if (state !== undefined) JSON.parse(snapshotText(state));
    parse(tail);
    const t2 = nowMs();
    const all = rows.all({ id: ID, from: 0 });
    const t3 = nowMs();
    parse(all);
    const t4 = nowMs();
    return {
      loadReadMs: t1 - t0,
      loadParseMs: t2 - t1,
      rawReadMs: t3 - t2,
      rawParseMs: t4 - t3,
    };
  } finally {
    db.close();
  }
}

function summarize(turns: number, samples: readonly Sample[]) {
  const med = (f: (s: Sample) => number) => median(samples.map(f));
  const events = med((s) => s.events);
  const perEvent = (ms: number) => round((ms * 1000) / events, 2);
  return {
    turns,
    events,
    snapshotSeq: med((s) => s.snapshotSeq),
    bodyRuns: med((s) => s.bodyRuns),
    rounds: samples.length,
    cpuUsPerEvent: perEvent(med((s) => s.cpuMs)),
    wallUsPerEvent: perEvent(med((s) => s.wallMs)),
    cpuMs: round(med((s) => s.cpuMs)),
    wallMs: round(med((s) => s.wallMs)),
    split: {
      loadCpuUsPerEvent: perEvent(med((s) => s.loadCpuMs)),
      loadWallUsPerEvent: perEvent(med((s) => s.loadWallMs)),
      storeReadUsPerEvent: perEvent(med((s) => s.storeReadMs)),
      readUsPerEvent: perEvent(med((s) => s.loadReadMs)),
      parseUsPerEvent: perEvent(med((s) => s.loadParseMs)),
      foldUsPerEvent: perEvent(med((s) => s.foldMs)),
      bodyCpuUsPerEvent: perEvent(med((s) => s.bodyCpuMs)),
      bodyWallUsPerEvent: perEvent(med((s) => s.bodyWallMs)),
    },
    baseline: {
      rawReadUsPerEvent: perEvent(med((s) => s.rawReadMs)),
      rawParseUsPerEvent: perEvent(med((s) => s.rawParseMs)),
      rawUsPerEvent: perEvent(med((s) => s.rawReadMs + s.rawParseMs)),
    },
  };
}
