/**
 * Red team on the snapshot policy of a state read back (runtime/load-state.ts L2, L3; bc36cc8):
 * bodies resumed without their cache on every turn (cache `maxExecutions: 0`), attacked on
 * - F5: every snapshot written equals the fold of the log up to its sequence number, and snapshot
 *   plus tail equals the whole fold, across parallel waits, retried steps, children, timers, the
 *   inbox, rotations, a fork and a restore, on memory, SQLite and a sealed, audited store;
 * - the policy's bounds: input that wakes no body (a sender's retried message) gets snapshots
 *   too (L3), so the tail stays short;
 * - N3: an uncached receive loop gets every message, also past the first READ_BATCH of them;
 * - crashes: a child process SIGKILLed in an uncached resume loop on SQLite loses no turn and
 *   doubles none, and recovers to the fold.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  aesGcmCodec,
  canonicalJson,
  createRuntime,
  flow$,
  foldAll,
  memoryStore,
  type Envelope,
  type Store,
} from "../src/index.ts";
import { READ_BATCH } from "../src/runtime/inbox.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { expectReplayEquality, mulberry32, runtimes, until } from "./helpers.ts";
import { spawn } from "./support/processes.ts";
import { slow } from "./support/slowdown.ts";
import {
  expectShotsFold,
  kid,
  mix,
  recording,
  resetTurns,
  turns,
} from "./support/snapshot-load.ts";

const rt = runtimes();
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "loom-redteam-snap-"));
  dirs.push(dir);
  return dir;
}

const bigOf = (log: readonly Envelope[]) => log.filter((e) => e.kind === "STEP_COMPLETED").length;

describe("N3: an uncached receive loop gets every message", () => {
  const loop = flow$("inbox-loop", async (ctx) => {
    for (;;) {
      const m = await ctx.receive<string>({ topic: "t" });
      if (m === "bye") return "done";
      await ctx.run("turn", () => `re: ${m}`);
    }
  });

  it("past READ_BATCH messages, each send is taken by the body read back for it", async () => {
    // Before: a send to a body no runtime held read the stream's first READ_BATCH messages, all
    // past the cursor of a state that had taken them: message READ_BATCH waited forever.
    const store = memoryStore();
    const r = rt(store, { cache: { maxExecutions: 0 } }).registerFlow(loop);
    await r.start("inbox-loop", null, { id: "c" });
    for (let i = 0; i < READ_BATCH + 3; i++) {
      await r.send("c", `m${i}`, { topic: "t" });
      await until(async () => {
        const s = await r.getState("c");
        return s.status === "parked" && s._settled?.step?.[`turn#${i}`] === `re: m${i}`;
      });
    }
    await r.send("c", "bye", { topic: "t" });
    expect((await r.waitForCompletion("c")).output).toBe("done");
  });

  it("L3: a retried send a parked body does not take still gets snapshots (bounded tail)", async () => {
    // Each retry of a consumed key appends a MESSAGE_CONSUMED duplicate and wakes no body, so no
    // run is made: before L3 appendSpecs never wrote a snapshot and each load folded them all.
    const { store, shots } = recording(memoryStore());
    const r = rt(store, { snapshotEvery: 10, cache: { maxExecutions: 0 } }).registerFlow(loop);
    await r.start("inbox-loop", null, { id: "c" });
    await r.send("c", "first", { topic: "t", key: "k" });
    await until(async () => (await r.getState("c"))._settled?.step?.["turn#0"] !== undefined);
    for (let i = 0; i < 90; i++) {
      const before = await store.head("c");
      await r.send("c", "again", { topic: "t", key: "k" });
      await until(async () => (await store.head("c")) > before);
    }
    const head = await store.head("c");
    expect(head).toBeGreaterThan(90);
    const snapshot = await store.loadSnapshot("c");
    expect(snapshot).toBeDefined();
    // A duplicate's ~100 bytes against a state of a few hundred: a snapshot every 10 to 20.
    expect(head - (snapshot?.seq ?? -1)).toBeLessThan(25);
    await expectShotsFold(store, shots);
    await expectReplayEquality(r, "c");
    await r.send("c", "bye", { topic: "t" });
    expect((await r.waitForCompletion("c")).output).toBe("done");
  });
});

describe("F5 for runs read back on every turn", () => {
  const stores: [string, () => Store, boolean][] = [
    ["memory", () => memoryStore(), true],
    ["SQLite", () => sqliteStore(join(freshDir(), "loom.db")), true],
    // Sealed and audited: the recorded snapshots are ciphertext, so F5 is read through the store.
    ["sealed, audited memory", () => memoryStore(), false],
  ];
  for (const [name, open, plain] of stores) {
    it(`every snapshot of a mixed uncached conversation folds (${name})`, async () => {
      resetTurns();
      const { store, shots } = recording(open());
      const errors: Error[] = [];
      const trust = plain
        ? {}
        : {
            codec: aesGcmCodec({ keys: { k1: randomBytes(32) }, currentKeyId: "k1" }),
            audit: { key: randomBytes(32) },
          };
      const r = rt(store, {
        snapshotEvery: 1,
        cache: { maxExecutions: 0 },
        features: { continueAsNew: true },
        onError: (e) => errors.push(e),
        ...trust,
      })
        .registerFlow(mix)
        .registerFlow(kid);
      await r.start(mix, null, { id: "m" });
      await turns(r, "m", 0, 10);
      // A fork of the head from its latest sequence, and a restore of it from its own state,
      // each driven on uncached.
      const head = await r.followToHead("m");
      await r.fork(head, await store.head(head), "f");
      await r.restoreFromState(head, mix, await r.getState(head));
      await turns(r, "m", 10, 12);
      const ids = (await r.list()).map((x) => x.executionId);
      expect(ids.filter((id) => id.startsWith("m")).length).toBeGreaterThanOrEqual(3);
      if (plain) {
        expect(shots.length).toBeGreaterThan(20);
        await expectShotsFold(store, shots);
      }
      for (const id of ids) await expectReplayEquality(r, id);
      // No snapshot the runtime wrote was refused on read (B2): bound, and to the right place.
      expect(errors.map((e) => e.message)).toEqual([]);
    });
  }

  it("compaction under an uncached conversation: snapshot plus tail is still the whole fold", async () => {
    resetTurns();
    const store = memoryStore();
    // Not one of `rt`'s: the check after each test folds the log, which compaction gapped.
    const r = createRuntime({
      store,
      pollIntervalMs: 20,
      snapshotEvery: 2,
      cache: { maxExecutions: 0 },
      features: { continueAsNew: true },
    })
      .registerFlow(mix)
      .registerFlow(kid);
    try {
      await r.start(mix, null, { id: "cm" });
      await turns(r, "cm", 0, 2);
      const whole = await store.read("cm");
      await r.compact("cm");
      expect((await store.read("cm")).length).toBeLessThan(whole.length);
      await turns(r, "cm", 2, 4);
      const tail = await store.read("cm", whole.length);
      expect(bigOf(tail)).toBeGreaterThan(1);
      const state = await r.getState("cm");
      expect(canonicalJson(state)).toBe(canonicalJson(foldAll([...whole, ...tail])));
    } finally {
      await r.close();
    }
  });
});

describe("crashes in an uncached resume loop on SQLite", () => {
  const CHILD = join(ROOT, "test/support/snapshot-load-crash-child.ts");
  const TURNS = 40;
  const link = (previous: string, msg: string): string =>
    createHash("sha256").update(`${previous}|${msg}`).digest("hex").slice(0, 16);

  /** Runs the child; with `killAt`, SIGKILLs it `delayMs` after it prints "turn <killAt>". */
  function runChild(db: string, ran: string, killAt?: { turn: number; delayMs: number }) {
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ["--import", "tsx", CHILD, db, ran, `${TURNS}`], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      });
      const guard = setTimeout(() => child.kill("SIGKILL"), slow(30_000));
      let stdout = "";
      let stderr = "";
      child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
      child.stderr.setEncoding("utf8").on("data", (c: string) => {
        stderr += c;
        if (killAt && stderr.includes(`turn ${killAt.turn}\n`)) {
          const plan = killAt;
          killAt = undefined;
          setTimeout(() => child.kill("SIGKILL"), plan.delayMs);
        }
      });
      child.on("close", (code) => {
        clearTimeout(guard);
        resolve({ code, stdout, stderr });
      });
    });
  }

  it("killed at four turns, recovered: every turn once in the log, state equals the fold", async () => {
    const dir = freshDir();
    const db = join(dir, "loom.db");
    const ran = join(dir, "ran.txt");
    const rand = mulberry32(28);
    for (const turn of [5, 14, 23, 32]) {
      const killed = await runChild(db, ran, { turn, delayMs: rand() * 4 });
      expect(killed.code, killed.stderr).not.toBe(0);
    }
    const last = await runChild(db, ran);
    expect(last.code, last.stderr).toBe(0);
    let expected = "seed";
    for (let t = 0; t < TURNS; t++) expected = link(expected, `m${t}`);
    expect(JSON.parse(last.stdout.trim())).toEqual({ status: "completed", output: expected });

    const store = sqliteStore(db);
    const r = createRuntime({ store, closeStore: true });
    try {
      const log = await r.readLog("conv");
      const callIds = (kind: string) =>
        log.filter((e) => e.kind === kind).map((e) => (e.payload as { callId: string }).callId);
      // Nothing lost, nothing doubled: each suspend resumed once, with its turn's message (a
      // resume lost or doubled shifts every later one), and one completion per turn.
      expect(log.filter((e) => e.kind === "RESUMED").length).toBe(TURNS + 1);
      const state = await r.getState("conv");
      const heard = Array.from({ length: TURNS }, (_, t) => [`suspend#${t}`, `m${t}`]);
      expect(state._settled?.suspend).toEqual(
        Object.fromEntries([...heard, [`suspend#${TURNS}`, "bye"]]),
      );
      const completed = callIds("STEP_COMPLETED");
      expect(completed.sort()).toEqual(Array.from({ length: TURNS }, (_, t) => `turn#${t}`).sort());
      // Every turn's step ran; a re-run only where a kill landed (at most one per kill).
      const runs = readFileSync(ran, "utf8").trim().split("\n").map(Number);
      expect(new Set(runs).size).toBe(TURNS);
      expect(runs.length - TURNS).toBeLessThanOrEqual(4);
      // Snapshots were written by the runs read back, and the latest folds with its tail.
      const snapshot = await store.loadSnapshot("conv");
      expect(snapshot?.seq).toBeGreaterThan(log.length / 2);
      await expectReplayEquality(r, "conv");
    } finally {
      await r.close();
    }
  }, 60_000);
});
