/**
 * ADR 0109 D8's frozen crash criterion on SQLite with real process kills: a two-generation
 * conversation with a message in flight, killed with SIGKILL at a sample of its appends, then
 * recovered by a second process through the ordinary recovery path (the background loop's
 * recoverAbandoned, and the caller's retried start with the same id). After every kill: exactly
 * one successor, one EXECUTION_CONTINUED, every message delivered exactly once, the retried key
 * only as a duplicate, the output of the run without a kill, and F5 for each generation.
 * (sim/scenarios.ts sweeps every append of the same conversation in memory; this is the
 * real-process sample.)
 *
 * Where the kill lands: the worker (test/fixtures/chain/worker.ts) announces each `appendMany`
 * call on stdout and, told to, holds at a named one, before it reaches SQLite or after it
 * committed, until it is killed: so "before" and "after" are exact. A point is named by what is
 * appended (`talk~1:EXECUTION_STARTED#0`: the first call that appends the successor's start),
 * not by the call's number, which a flush's timing can shift. A "race" kill holds nothing and is
 * sent 0-3 ms after the worker announced the call. The points are the first append (a kill
 * before the start's commit), both sides of the successor's start and of the predecessor's
 * commit (the rotation's start-to-commit window), and a seeded sample of the other appends of
 * the run without a kill.
 *
 * The messages: this process sends them through its own runtime on the same file, paced by the
 * worker's progress: one per receive that parks ("one", "two", then "one, retried" with "four"),
 * and "three" as soon as the worker announces the successor's first append, so it is in flight
 * across the rotation. After a kill, one more is sent while no worker runs, and one when the
 * recovery worker's start is in (more are only ever sent early, never late, so nothing waits).
 *
 * Cites K1 (successor first, then the commit), N1 (each message consumed once, a consumed key
 * dropped) and F5 (the state read back through snapshots equals a fold of the whole log).
 */
import { spawn } from "./support/processes.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, type ExpectStatic } from "vitest";
import {
  canonicalJson,
  createRuntime,
  foldAll,
  isLoomError,
  type Envelope,
  type Runtime,
} from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { limiter, mulberry32 } from "./helpers.ts";
import { slow } from "./support/slowdown.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const WORKER = join(ROOT, "test/fixtures/chain/worker.ts");
const CHAIN = "talk";
const SUCCESSOR = `${CHAIN}~1`;
/** Draws the sampled kill points; printed with the results. */
const SEED = 109;
const SAMPLED = 7;
/** The fixed points (5) and the sampled ones. */
const POINTS = Array.from({ length: 5 + SAMPLED }, (_, i) => i);
/** Two points at a time: a crash and a recovery child each, on a 2-core machine. */
const PARALLEL = 2;
const CHILD_TIMEOUT_MS = slow(30_000);

/** What is sent, in order; each group is released by one credit (see the module head). */
const GROUPS = [
  [{ text: "one", key: "k1" }],
  [{ text: "two", key: "k2" }],
  [{ text: "three", key: "k3" }],
  [
    { text: "one, retried", key: "k1" },
    { text: "four", key: "k4" },
  ],
];

type Side = "before" | "after" | "race";

/** The `occurrence`-th append call (from 0) with a batch `<executionId>:<kinds>` equal to `key`. */
interface KillPoint {
  key: string;
  occurrence: number;
  side: Side;
  delayMs: number;
  /** Its call number in the run without a kill. */
  cleanAppend: number;
}

/** Each batch's `<executionId>:<kinds>` in an announced `<batches>` (its status dropped). */
const keysOf = (batches: string) =>
  batches === "" ? [] : batches.split(",").map((b) => b.slice(0, b.lastIndexOf(":")));

interface ChildRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  lines: string[];
  stderr: string;
}

interface ChildReport {
  outcome: { status: string; output?: unknown };
  head: string;
  states: Record<string, unknown>;
}

/** Paces the messages: `credit()` releases the next group; sends are one at a time. */
class Sender {
  readonly sent: { text: string; key: string; seq: number; whileDead: boolean }[] = [];
  readonly errors: string[] = [];
  workerDead = false;
  private credits = 0;
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly operator: Runtime) {}

  credit(): void {
    this.credits++;
    this.queue = this.queue.then(() => this.flush());
  }

  settled(): Promise<void> {
    return this.queue;
  }

  private async flush(): Promise<void> {
    for (; this.credits > 0; this.credits--) {
      const group = GROUPS.find((g) => g.some((m) => !this.isSent(m)));
      if (!group) return;
      for (const m of group.filter((x) => !this.isSent(x))) {
        try {
          const { seq } = await this.operator.send(CHAIN, m.text, { key: m.key });
          this.sent.push({ ...m, seq, whileDead: this.workerDead });
        } catch (e) {
          // Before the start committed there is nothing to send to: the credit waits.
          if (isLoomError(e, "LOOM_NOT_FOUND")) return;
          this.errors.push(`send "${m.text}": ${e instanceof Error ? e.message : String(e)}`);
          this.sent.push({ ...m, seq: -1, whileDead: this.workerDead });
        }
      }
    }
  }

  private isSent(m: { text: string }): boolean {
    return this.sent.some((s) => s.text === m.text);
  }
}

/**
 * Credits the sender for what a worker line shows: a receive parked, the successor's first
 * append, and (when `ready` counts) the recovery worker's start being in.
 */
function pace(sender: Sender, seenSuccessor: { yes: boolean }, creditReady: boolean) {
  return (text: string) => {
    const [word, , batches = "", codes = ""] = text.split(" ");
    if (word === "ready" && creditReady) sender.credit();
    if (word === "append" && !seenSuccessor.yes && batches.includes(`${SUCCESSOR}:`)) {
      seenSuccessor.yes = true;
      sender.credit();
    }
    if (word !== "appended") return;
    const ok = codes.split(",");
    batches.split(",").forEach((b, i) => {
      if (b.endsWith(":parked") && ok[i] === "ok") sender.credit();
    });
  };
}

/** Runs the worker; with `kill`, sends SIGKILL at the point (see the module head). */
function runWorker(
  dbPath: string,
  mode: "start" | "recover",
  onLine: (text: string) => void,
  kill?: KillPoint,
): Promise<ChildRun> {
  return new Promise<ChildRun>((resolve, reject) => {
    const hold =
      kill && kill.side !== "race" ? [`hold=${kill.key}#${kill.occurrence}:${kill.side}`] : [];
    const args = ["--import", "tsx", WORKER, dbPath, CHAIN, mode, ...hold];
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    const run: ChildRun = { code: null, signal: null, lines: [], stderr: "" };
    const guard = setTimeout(() => child.kill("SIGKILL"), CHILD_TIMEOUT_MS);
    const killNow = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    };
    let matches = 0;
    let pending = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const text of lines) {
        run.lines.push(text);
        const [word, , batches = ""] = text.split(" ");
        if (kill?.side === "race" && word === "append" && keysOf(batches).includes(kill.key)) {
          if (matches++ === kill.occurrence) setTimeout(killNow, kill.delayMs);
        }
        if (word === "hold") killNow();
        onLine(text);
      }
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (run.stderr += chunk));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(guard);
      Object.assign(run, { code, signal });
      resolve(run);
    });
  });
}

function reportOf(run: ChildRun, what: string): ChildReport {
  const line = run.lines.find((l) => l.startsWith("result "));
  if (run.code !== 0 || line === undefined) {
    throw new Error(
      `${what}: exit ${run.code ?? run.signal}\n${run.lines.join("\n")}\nstderr: ${run.stderr}`,
    );
  }
  return JSON.parse(line.slice("result ".length)) as ChildReport;
}

const tail = (run: ChildRun) => run.lines.filter((l) => !l.startsWith("result ")).slice(-12);

/** The batches of each `appendMany` call a worker announced, in order. */
const appendsOf = (run: ChildRun) =>
  run.lines.filter((l) => l.startsWith("append ")).map((l) => l.split(" ")[2] ?? "");

/** The run without a kill's appends: the fixed points and a seeded sample of the others. */
function choosePoints(appends: readonly string[]): KillPoint[] {
  const occurrenceOf = (key: string, before: number) =>
    appends.slice(0, before).filter((a) => keysOf(a).includes(key)).length;
  const pointAt = (cleanAppend: number, side: Side, delayMs = 0): KillPoint => {
    const key = keysOf(appends[cleanAppend] ?? "")[0] ?? "?";
    return { key, occurrence: occurrenceOf(key, cleanAppend), side, delayMs, cleanAppend };
  };
  const callWith = (key: string) => appends.findIndex((a) => keysOf(a).includes(key));
  const start = callWith(`${SUCCESSOR}:EXECUTION_STARTED`);
  const commit = callWith(`${CHAIN}:EXECUTION_CONTINUED`);
  const points = [
    pointAt(0, "before"),
    { ...pointAt(start, "before"), key: `${SUCCESSOR}:EXECUTION_STARTED`, occurrence: 0 },
    { ...pointAt(start, "after"), key: `${SUCCESSOR}:EXECUTION_STARTED`, occurrence: 0 },
    { ...pointAt(commit, "before"), key: `${CHAIN}:EXECUTION_CONTINUED`, occurrence: 0 },
    { ...pointAt(commit, "after"), key: `${CHAIN}:EXECUTION_CONTINUED`, occurrence: 0 },
  ];
  // The sample: calls whose first batch is one kind of event, and not the successor's receives.
  // A flush can find its queue empty; and "three" races the successor's first receive, so
  // whether the worker or this process consumes it, and whether that receive parks first,
  // changes from run to run: a killed run might never make such a call.
  const racy = [`${SUCCESSOR}:SUSPENDED`, `${SUCCESSOR}:MESSAGE_CONSUMED`];
  const candidates = appends.flatMap((a, i) =>
    /^[^,+]+:[^,+]+(,|$)/.test(a) && !racy.includes(keysOf(a)[0] ?? "") ? [i] : [],
  );
  const random = mulberry32(SEED);
  const sides: Side[] = ["before", "after", "race"];
  while (points.length < POINTS.length) {
    const at = candidates[Math.floor(random() * candidates.length)] ?? 0;
    const side = sides[Math.floor(random() * sides.length)] ?? "race";
    const point = pointAt(at, side, side === "race" ? random() * 3 : 0);
    const same = (p: KillPoint) =>
      p.key === point.key && p.occurrence === point.occurrence && p.side === point.side;
    if (!points.some(same)) points.push(point);
  }
  return points;
}

const describePoint = (p: KillPoint) =>
  `${p.key}#${p.occurrence} ${p.side}${p.side === "race" ? ` +${p.delayMs.toFixed(1)} ms` : ""}`;

const dirs: string[] = [];
function freshDb(): string {
  const dir = mkdtempSync(join(tmpdir(), "loom-chain-crash-"));
  dirs.push(dir);
  return join(dir, "loom.db");
}

/** This process's runtime on the file: it sends, and runs no flow. */
const operatorOn = (dbPath: string) =>
  createRuntime({
    store: sqliteStore(dbPath),
    background: false,
    features: { continueAsNew: true },
  });

const count = (log: readonly Envelope[], kind: string) => log.filter((e) => e.kind === kind).length;

/** A log's MESSAGE_CONSUMED facts in order: `<seq>`, or `<seq> duplicate`. */
const consumptions = (log: readonly Envelope[]) =>
  log
    .filter((e) => e.kind === "MESSAGE_CONSUMED")
    .map((e) => e.payload as { seq: number; duplicate?: boolean })
    .map((p) => (p.duplicate === true ? `${p.seq} duplicate` : `${p.seq}`));

function stepCompletions(log: readonly Envelope[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of log.filter((x) => x.kind === "STEP_COMPLETED")) {
    const callId = (e.payload as { callId?: string }).callId ?? "?";
    out[callId] = (out[callId] ?? 0) + 1;
  }
  return out;
}

/** What is committed now, for the report: each generation's event count and last kind. */
async function committed(operator: Runtime): Promise<string> {
  const parts: string[] = [];
  for (const id of [CHAIN, SUCCESSOR]) {
    const log = await operator.readLog(id);
    parts.push(log.length === 0 ? `${id} -` : `${id} ${log.length} (${log.at(-1)?.kind})`);
  }
  return parts.join(", ");
}

/** The end state on the file, and the recovering worker's report of it, against the criterion. */
async function checkEnd(
  expect: ExpectStatic,
  at: string,
  operator: Runtime,
  sender: Sender,
  report: ChildReport,
  reference: ChildReport["outcome"],
): Promise<void> {
  const logs = await Promise.all([CHAIN, SUCCESSOR].map((id) => operator.readLog(id)));
  const [g0 = [], g1 = []] = logs;
  expect(g0.length > 0 && g1.length > 0, `${at}: both generations exist`).toBe(true);
  expect(await operator.readLog(`${CHAIN}~2`), `${at}: no third generation`).toEqual([]);
  for (const [i, log] of logs.entries()) {
    const gen = `${at}: generation ${i}`;
    expect(
      log.map((e) => e.seq),
      `${gen}: sequence numbers dense from 0`,
    ).toEqual(log.map((_, j) => j));
    expect(count(log, "EXECUTION_STARTED"), `${gen}: one EXECUTION_STARTED`).toBe(1);
    expect(stepCompletions(log), `${gen}: each reply completed once`).toEqual({
      "reply#0": 1,
      "reply#1": 1,
    });
  }
  // K1: one successor, named by the predecessor's one commit, its last event.
  expect(count(g0, "EXECUTION_CONTINUED"), `${at}: one EXECUTION_CONTINUED`).toBe(1);
  expect(g0.at(-1)?.kind, `${at}: generation 0 ends with it`).toBe("EXECUTION_CONTINUED");
  expect(g0.at(-1)?.payload, `${at}: it names the successor`).toEqual({
    successorId: SUCCESSOR,
    chainId: CHAIN,
    generation: 1,
  });
  expect(g1[0]?.payload, `${at}: the successor names its predecessor`).toMatchObject({
    chainId: CHAIN,
    generation: 1,
    continuedFrom: { executionId: CHAIN },
  });
  expect(count(g1, "EXECUTION_CONTINUED"), `${at}: generation 1 did not continue`).toBe(0);
  expect(count(g1, "EXECUTION_COMPLETED"), `${at}: generation 1 completed once`).toBe(1);
  expect(g1.at(-1)?.kind, `${at}: generation 1 ends with it`).toBe("EXECUTION_COMPLETED");
  expect(report.head, `${at}: the chain's head`).toBe(SUCCESSOR);
  expect(canonicalJson(report.outcome), `${at}: the output of the run without a kill`).toBe(
    canonicalJson(reference),
  );
  // N1: each message once, in its generation; the retried k1 only as a duplicate, after the
  // rotation (the dedupe window rode the carry).
  expect(sender.errors, `${at}: every send succeeded`).toEqual([]);
  const stream = await operator.store.readMessages(CHAIN, "main", -1, 100);
  expect(
    stream.map((m) => `${m.seq} ${m.key}`),
    `${at}: the stream holds each send once`,
  ).toEqual(["0 k1", "1 k2", "2 k3", "3 k1", "4 k4"]);
  expect(consumptions(g0), `${at}: generation 0 consumed "one" and "two"`).toEqual(["0", "1"]);
  expect(
    consumptions(g1),
    `${at}: generation 1 consumed "three", dropped the retry, consumed "four"`,
  ).toEqual(["2", "3 duplicate", "4"]);
  // F5, per generation.
  for (const [i, id] of [CHAIN, SUCCESSOR].entries()) {
    expect(
      canonicalJson(foldAll(logs[i] ?? [])),
      `${at}: foldAll(log of ${id}) equals the state the store gives`,
    ).toBe(canonicalJson(report.states[id]));
  }
}

interface PointResult {
  index: number;
  point: KillPoint;
  /** The killed worker's last append line, and whether it was held there. */
  lastAppend: string;
  killed: boolean;
  atKill: string;
  sentWhileDead: number;
  seconds: number;
  passed: boolean;
  /** The tail of each worker's stdout (its result apart), printed when the point fails. */
  lines: string[];
}

let clean: {
  dbPath: string;
  sender: Sender;
  report: ChildReport;
  appends: string[];
  seconds: number;
};
let points: KillPoint[] = [];
const results: PointResult[] = [];
const slot = limiter(PARALLEL);
const suiteStart = performance.now();

beforeAll(async () => {
  const t0 = performance.now();
  const dbPath = freshDb();
  const operator = operatorOn(dbPath);
  try {
    const sender = new Sender(operator);
    const run = await runWorker(dbPath, "start", pace(sender, { yes: false }, false));
    await sender.settled();
    const report = reportOf(run, "the run without a kill");
    const seconds = (performance.now() - t0) / 1000;
    clean = { dbPath, sender, report, appends: appendsOf(run), seconds };
    points = choosePoints(clean.appends);
  } finally {
    await operator.close();
  }
});

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  const rows = [...results]
    .sort((a, b) => a.index - b.index)
    .map(
      (r) =>
        `  ${r.passed ? "ok  " : "FAIL"} ${describePoint(r.point).padEnd(42)} ` +
        `(call ${String(r.point.cleanAppend).padStart(2)} without a kill) ` +
        `${r.killed ? `killed at "${r.lastAppend}"` : "not reached: the worker ran to the end"}; ` +
        `committed then: ${r.atKill}; ${r.sentWhileDead} sent while no worker ran; ` +
        `${r.seconds.toFixed(1)} s` +
        (r.passed ? "" : `\n      ${r.lines.join("\n      ")}`),
    );
  const appends = clean.appends.map((a, i) => `${i} ${a || "(empty)"}`).join("\n    ");
  console.log(
    `chain crash test (seed ${SEED}): run without a kill ${clean.seconds.toFixed(1)} s; ` +
      `total ${((performance.now() - suiteStart) / 1000).toFixed(1)} s\n` +
      `  its ${clean.appends.length} append calls:\n    ${appends}\n${rows.join("\n")}`,
  );
});

describe("ADR 0109 D8 on SQLite: SIGKILL at a sample of a two-generation conversation's appends", () => {
  it("the run without a kill meets the criterion", async () => {
    expect(clean.report.outcome).toEqual({
      status: "completed",
      output: { turn: 4, heard: ["ONE", "TWO", "THREE", "FOUR"] },
    });
    const operator = operatorOn(clean.dbPath);
    try {
      await checkEnd(
        expect,
        "without a kill",
        operator,
        clean.sender,
        clean.report,
        clean.report.outcome,
      );
    } finally {
      await operator.close();
    }
  });

  it.concurrent.for(POINTS)(
    "kill point %i: one successor, one commit, each message once",
    // The time a point waits for its slot counts too; each child has its own guard.
    { timeout: slow(120_000) },
    async (index, { expect }) => {
      await slot(async () => {
        const t0 = performance.now();
        const point = points[index];
        if (!point) throw new Error(`no kill point ${index}`);
        const at = `kill at ${describePoint(point)}`;
        const dbPath = freshDb();
        const operator = operatorOn(dbPath);
        const result: PointResult = {
          index,
          point,
          lastAppend: "none",
          killed: false,
          atKill: "",
          sentWhileDead: 0,
          seconds: 0,
          passed: false,
          lines: [],
        };
        results.push(result);
        try {
          const sender = new Sender(operator);
          const seenSuccessor = { yes: false };
          const first = await runWorker(dbPath, "start", pace(sender, seenSuccessor, false), point);
          result.killed = first.signal === "SIGKILL";
          result.lines.push(...tail(first), "-- recovery --");
          const announced = first.lines.filter((l) => /^(append|appended) /.test(l));
          const held = first.lines.at(-1)?.startsWith("hold ") ? " (held)" : "";
          result.lastAppend = `${announced.at(-1)?.replace(/ ok(,ok)*$/, "")}${held}`;
          expect(
            first.signal === "SIGKILL" || first.code === 0,
            `${at}: exit ${first.code}, ${first.stderr}`,
          ).toBe(true);
          await sender.settled();
          result.atKill = await committed(operator);
          // One message while no worker runs: in flight across the crash.
          sender.workerDead = true;
          sender.credit();
          await sender.settled();
          sender.workerDead = false;
          result.sentWhileDead = sender.sent.filter((s) => s.whileDead).length;
          const recovery = await runWorker(dbPath, "recover", pace(sender, seenSuccessor, true));
          await sender.settled();
          result.lines.push(...tail(recovery));
          const report = reportOf(recovery, `${at}: recovery`);
          expect(recovery.stderr, `${at}: the recovering worker reported no errors`).not.toContain(
            "loom error",
          );
          await checkEnd(expect, at, operator, sender, report, clean.report.outcome);
          result.passed = true;
        } finally {
          result.seconds = (performance.now() - t0) / 1000;
          await operator.close();
        }
      });
    },
  );
});
