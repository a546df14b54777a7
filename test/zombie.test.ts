/**
 * Zombie acceptance tests.
 *
 * 1. An owner whose lease was taken over cannot append (FencedError), and nothing it tried to
 *    write appears in the log (W1, R5, S3).
 * 2. Two loom workers on one SQLite file never drive the same execution at once (W1, W2, W6).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import type { Envelope } from "../src/kernel/events.ts";
import { canonicalJson, type Json } from "../src/kernel/json.ts";
import { foldAll } from "../src/fold/fold.ts";
import { flow$ } from "../src/runtime/flow.ts";
import { createRuntime, type Runtime } from "../src/runtime/runtime.ts";
import { memoryStore } from "../src/store/memory/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import type { AppendBatch, Store } from "../src/store/spi.ts";
import { mulberry32 } from "./helpers.ts";
import { slow } from "./support/slowdown.ts";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), "loom-zombie-"));
  dirs.push(dir);
  return join(dir, "loom.db");
}

interface Refusal {
  owner: string;
  code: string;
  batch: AppendBatch;
}

/**
 * A store that delegates every method to `inner`, records the batches it refused (by owner) and,
 * with `yieldFirst`, gives the event loop a turn before each call, as a networked store would;
 * without it every store call of these in-process stores finishes in microtasks, and one
 * runtime's recovery pass would take every lease before the other's loop got to run.
 */
function watched(
  inner: Store,
  owner: string,
  refusals: Refusal[],
  options: { yieldFirst?: boolean } = {},
): Store {
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    if (options.yieldFirst) await nextTurn();
    return fn();
  };
  return {
    kind: inner.kind,
    appendMany: (batches) =>
      call(async () => {
        const outcomes = await inner.appendMany(batches);
        outcomes.forEach((o, i) => {
          const batch = batches[i];
          if (!o.ok && batch) refusals.push({ owner, code: o.error.code, batch });
        });
        return outcomes;
      }),
    read: (id, fromSeq) => call(() => inner.read(id, fromSeq)),
    head: (id) => call(() => inner.head(id)),
    list: (query) => call(() => inner.list(query)),
    // The SPI lets the caller change `snapshot` once this yields: copy it before the turn.
    saveSnapshot: (id, snapshot) => {
      const copy = structuredClone(snapshot);
      return call(() => inner.saveSnapshot(id, copy));
    },
    loadSnapshot: (id) => call(() => inner.loadSnapshot(id)),
    acquireLease: (id, who, opts) => call(() => inner.acquireLease(id, who, opts)),
    renewLease: (id, who, fence, opts) => call(() => inner.renewLease(id, who, fence, opts)),
    takeNotices: (who) => call(() => inner.takeNotices(who)),
    putSchedule: (s) => call(() => inner.putSchedule(s)),
    listSchedules: () => call(() => inner.listSchedules()),
    advanceSchedule: (name, at) => call(() => inner.advanceSchedule(name, at)),
    deleteSchedule: (name) => call(() => inner.deleteSchedule(name)),
    setSchedulePaused: (name, paused, at) => call(() => inner.setSchedulePaused(name, paused, at)),
    forksOf: (id, limit) => call(() => inner.forksOf(id, limit)),
    admitQueued: (owner, opts) => call(() => inner.admitQueued(owner, opts)),
    queueView: (queue, opts) => call(() => inner.queueView(queue, opts)),
    queueNames: () => call(() => inner.queueNames()),
    heartbeat: (member) => call(() => inner.heartbeat(member)),
    members: (sinceMs) => call(() => inner.members(sinceMs)),
    leaveFleet: (owner) => call(() => inner.leaveFleet(owner)),
    leasesOf: (owner, nowMs, limit) => call(() => inner.leasesOf(owner, nowMs, limit)),
    reserve: (limiter, limit, ask, nowMs) => call(() => inner.reserve(limiter, limit, ask, nowMs)),
    settle: (limiter, id, used, nowMs) => call(() => inner.settle(limiter, id, used, nowMs)),
    withdraw: (limiter, id) => call(() => inner.withdraw(limiter, id)),
    blockLimiter: (limiter, untilMs) => call(() => inner.blockLimiter(limiter, untilMs)),
    limiterView: (limiter, nowMs) => call(() => inner.limiterView(limiter, nowMs)),
    limiterNames: () => call(() => inner.limiterNames()),
    appendMessage: (chain, m) => call(() => inner.appendMessage(chain, m)),
    readMessages: (chain, t, after, limit) =>
      call(() => inner.readMessages(chain, t, after, limit)),
    deleteExecution: (id) => call(() => inner.deleteExecution(id)),
    compact: (id, through, keep) => call(() => inner.compact(id, through, keep)),
    putKey: (keyId, material) => call(() => inner.putKey(keyId, material)),
    getKey: (keyId) => call(() => inner.getKey(keyId)),
    listKeys: (prefix) => call(() => inner.listKeys(prefix)),
    destroyKey: (keyId) => call(() => inner.destroyKey(keyId)),
    releaseLease: (id, who, fence) => call(() => inner.releaseLease(id, who, fence)),
    getLease: (id) => call(() => inner.getLease(id)),
    dueTimers: (nowMs, limit) => call(() => inner.dueTimers(nowMs, limit)),
    nextWakeAt: () => call(() => inner.nextWakeAt()),
    deleteTimer: (id, timerId) => call(() => inner.deleteTimer(id, timerId)),
    deferTimer: (id, timerId, at) => call(() => inner.deferTimer(id, timerId, at)),
    close: () => inner.close(),
  };
}

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

function callIdOf(e: Envelope): string | undefined {
  const p = e.payload;
  if (p === null || typeof p !== "object" || Array.isArray(p)) return undefined;
  return typeof p.callId === "string" ? p.callId : undefined;
}

/** STEP_COMPLETED count per call id. */
function completions(log: readonly Envelope[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of log) {
    if (e.kind !== "STEP_COMPLETED") continue;
    const id = callIdOf(e) ?? "?";
    counts[id] = (counts[id] ?? 0) + 1;
  }
  return counts;
}

interface StorePair {
  a: Store;
  b: Store;
  /** A third handle for the test's own reads. */
  reader: Store;
  close(): Promise<void>;
}

const STORE_KINDS: { kind: string; open: () => StorePair }[] = [
  {
    kind: "memory",
    open: () => {
      const store = memoryStore();
      return { a: store, b: store, reader: store, close: () => store.close() };
    },
  },
  {
    kind: "sqlite",
    open: () => {
      // Three connections to one file, as three processes would have.
      const path = tempDb();
      const [a, b, reader] = [sqliteStore(path), sqliteStore(path), sqliteStore(path)];
      return {
        a,
        b,
        reader,
        close: async () => {
          await Promise.all([a.close(), b.close(), reader.close()]);
        },
      };
    },
  },
];

/**
 * The lease TTL on the shared clock. A live owner's heartbeat renews every TTL/3 of real time
 * against that same clock, so the TTL is long in real terms: no heartbeat of A fires during the
 * test (which takes milliseconds), and A stays a zombie that still believes it holds the lease.
 * The test expires it by moving the clock, not by waiting.
 */
const LEASE_TTL_MS = 30_000;

describe.each(STORE_KINDS)("a zombie owner on the $kind store", ({ open }) => {
  it("cannot append after a takeover (LOOM_FENCED) and nothing it wrote reaches the log", async () => {
    const stores = open();
    let t = 1_700_000_000_000;
    const clock = { now: () => t };
    const refusals: Refusal[] = [];
    const errors: Error[] = [];
    const onError = (e: Error) => void errors.push(e);
    const common = { clock, leaseTtlMs: LEASE_TTL_MS, background: false, closeStore: false };
    const a = createRuntime({
      ...common,
      store: watched(stores.a, "A", refusals),
      ownerId: "owner-a",
      onError,
    });
    const b = createRuntime({
      ...common,
      store: watched(stores.b, "B", refusals),
      ownerId: "owner-b",
      onError,
    });

    // The first invocation of "blocker" (A's) waits for the gate; the second (B's) does not.
    let invocations = 0;
    const entered = deferred();
    const gate = deferred();
    const zombie = flow$("zombie", async (ctx, input: { n: number }) => {
      const first = await ctx.run("first", () => input.n + 1);
      const blocked = await ctx.run("blocker", async () => {
        const attempt = ++invocations;
        if (attempt === 1) {
          entered.resolve();
          await gate.promise;
        }
        return `attempt-${attempt}`;
      });
      const last = await ctx.run("last", () => `${blocked}/${first}`);
      return { first, blocked, last };
    });
    b.registerFlow(zombie);

    try {
      const id = "zombie-1";
      await a.start(zombie, { n: 41 }, { id });
      await entered.promise;
      await a.journal.drain();
      const leaseA = await stores.reader.getLease(id);
      expect(leaseA?.owner).toBe("owner-a");
      const fenceA = leaseA?.fence ?? -1;
      const headAtTakeover = await stores.reader.head(id);
      expect(
        (await stores.reader.read(id)).map((e) => e.kind),
        "A recorded the start, the first step (one event, R9) and the start of the blocker",
      ).toEqual(["EXECUTION_STARTED", "STEP_COMPLETED", "STEP_STARTED"]);

      // W1: while A's lease is live, B leaves the execution alone.
      expect(await b.recoverAbandoned()).toEqual([]);

      t += LEASE_TTL_MS + 1;
      expect(await b.recoverAbandoned(), "B takes over the expired lease").toEqual([id]);
      const outcomeB = await b.waitForCompletion(id);
      expect(outcomeB).toEqual({
        status: "completed",
        output: { first: 42, blocked: "attempt-2", last: "attempt-2/42" },
      });
      const leaseB = await stores.reader.getLease(id);
      const fenceB = leaseB?.fence ?? -1;
      expect(fenceB).toBeGreaterThan(fenceA);

      // Release A: its step returns and A tries to append STEP_COMPLETED under its old fence.
      const waitA = a.waitForCompletion(id);
      gate.resolve();
      const outcomeA = await waitA;
      await a.journal.drain();
      expect(outcomeA, "A's wait reads B's outcome from the log").toEqual(outcomeB);

      expect(refusals.map((r) => [r.owner, r.code])).toEqual([["A", "LOOM_FENCED"]]);
      const refused = refusals[0]?.batch;
      expect(refused?.fence).toBe(fenceA);
      expect(refused?.events.map((e) => [e.kind, callIdOf(e), e.payload])).toEqual([
        [
          "STEP_COMPLETED",
          "blocker#0",
          { callId: "blocker#0", output: "attempt-1" } satisfies Json,
        ],
      ]);

      const log = await stores.reader.read(id);
      expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i));
      expect(JSON.stringify(log)).not.toContain("attempt-1");
      const before = log.filter((e) => e.seq <= headAtTakeover).map((e) => e.meta?.fence);
      const after = log.filter((e) => e.seq > headAtTakeover).map((e) => e.meta?.fence);
      expect(new Set(before)).toEqual(new Set([fenceA]));
      expect(after.length).toBeGreaterThan(0);
      expect(new Set(after), "every event after the takeover carries B's fence").toEqual(
        new Set([fenceB]),
      );
      expect(completions(log)).toEqual({ "first#0": 1, "blocker#0": 1, "last#0": 1 });
      expect(log.filter((e) => e.kind === "EXECUTION_COMPLETED")).toHaveLength(1);
      expect(log.at(-1)?.kind).toBe("EXECUTION_COMPLETED");
      const state = foldAll(log);
      expect(state.frames["blocker#0"]?.attempts, "the blocker was started by A, then B").toBe(2);
      expect(canonicalJson(await a.getState(id))).toBe(canonicalJson(state));
      expect(invocations).toBe(2);
      expect(errors).toEqual([]);
    } finally {
      gate.resolve();
      await a.close();
      await b.close();
      await stores.close();
    }
  });
});

/** Picks the steps' durations (LOOM_SEED overrides it); the interleaving is the scheduler's. */
const SEED = Number(process.env.LOOM_SEED ?? 7);
const EXECUTIONS = 20;
const ROUNDS = 4;
/** After this many rounds each execution suspends, and the test resumes it through the worker
 * that did not run its last step: every execution changes hands at least once. */
const SUSPEND_AFTER = 2;

const sleepMs = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + slow(30_000);
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleepMs(10);
  }
}

describe("two loom workers on one SQLite file", () => {
  it("never drive the same execution at once, and each execution completes once", async () => {
    const path = tempDb();
    const at = `seed ${SEED}`;
    const random = mulberry32(SEED);
    const inFlight = new Map<string, string>();
    const overlaps: string[] = [];
    const ran: { id: string; step: string; owner: string }[] = [];
    const refusals: Refusal[] = [];
    const errors: string[] = [];

    /** The same flow for each worker; its steps record which owner ran them and check that no
     * other step of the execution is in flight. */
    const competeFor = (owner: string) =>
      flow$("compete", async (ctx, input: { n: number }) => {
        let total = input.n;
        let note = "";
        for (let k = 0; k < ROUNDS; k++) {
          if (k === SUSPEND_AFTER) note = await ctx.suspend<string>();
          const before = total;
          total = await ctx.run(`work-${k}`, async () => {
            const id = ctx.executionId;
            const other = inFlight.get(id);
            if (other !== undefined) overlaps.push(`${id} work-${k}: ${owner} while ${other}`);
            inFlight.set(id, owner);
            ran.push({ id, step: `work-${k}`, owner });
            await sleepMs(1 + Math.floor(random() * 4));
            if (inFlight.get(id) === owner) inFlight.delete(id);
            return before * 2 + k;
          });
          await ctx.sleep(2 + ((input.n * 7 + k * 3) % 8));
        }
        return { total, note };
      });
    const expectedOutput = (n: number) => {
      let total = n;
      for (let k = 0; k < ROUNDS; k++) total = total * 2 + k;
      return { total, note: `note-${n}` };
    };

    // A starter (think: an API process) records the executions; its body never makes a call,
    // and closing it releases their leases, so the two workers find them all runnable at once.
    const starter = createRuntime({ store: sqliteStore(path), background: false });
    const stub = flow$("compete", (_ctx, _input: { n: number }) => new Promise<number>(() => {}));
    const names = ["w1", "w2"];
    const workers: Runtime[] = names.map((owner) =>
      createRuntime({
        store: watched(sqliteStore(path), owner, refusals, { yieldFirst: true }),
        ownerId: owner,
        pollIntervalMs: 20,
        leaseTtlMs: 5_000,
        // A small parked-run cache: an evicted run wakes only through the store's timer rows,
        // which both workers poll; a cached one must pass the W2 check after the other worker
        // drove its execution.
        cache: { maxExecutions: 2 },
        onError: (e) => void errors.push(`${owner}: ${e.message}`),
      }).registerFlow(competeFor(owner)),
    );
    const reader = sqliteStore(path);
    const ids = Array.from(
      { length: EXECUTIONS },
      (_, i) => `compete-${String(i).padStart(2, "0")}`,
    );
    try {
      for (const [i, id] of ids.entries()) await starter.start(stub, { n: i }, { id });
      await starter.close();

      // Resume each suspended execution through the worker that did not run its last step.
      await Promise.all(
        ids.map(async (id, i) => {
          await until(`${id} to suspend`, async () => {
            const state = foldAll(await reader.read(id));
            return state.frames["suspend#0"]?.status === "waiting" ? true : undefined;
          });
          const last = ran.filter((r) => r.id === id).at(-1)?.owner;
          const other = workers[names.indexOf(last === "w1" ? "w2" : "w1")];
          await other?.resume(id, `note-${i}`);
        }),
      );
      await until("every execution to end", async () => {
        const done = await reader.list({ status: ["completed", "failed", "cancelled"] });
        return done.length === EXECUTIONS ? true : undefined;
      });

      expect(overlaps, `${at}: steps of one execution in flight in two places`).toEqual([]);
      for (const [i, id] of ids.entries()) {
        const log = await reader.read(id);
        const dense = log.map((_, s) => s);
        expect(
          log.map((e) => e.seq),
          `${at} ${id}: dense`,
        ).toEqual(dense);
        const kinds = log.map((e) => e.kind);
        expect(kinds.at(-1), `${at} ${id}: ends completed`).toBe("EXECUTION_COMPLETED");
        expect(
          kinds.filter((k) => k === "EXECUTION_COMPLETED"),
          `${at} ${id}`,
        ).toHaveLength(1);
        expect(
          kinds.filter((k) => k === "EXECUTION_STARTED"),
          `${at} ${id}`,
        ).toHaveLength(1);
        const expected = Object.fromEntries(
          Array.from({ length: ROUNDS }, (_, k) => [`work-${k}#0`, 1]),
        );
        expect(completions(log), `${at} ${id}: one STEP_COMPLETED per step`).toEqual(expected);
        expect(foldAll(log).output, `${at} ${id}: output`).toEqual(expectedOutput(i));
      }
      const handedOver = ids.filter(
        (id) => new Set(ran.filter((r) => r.id === id).map((r) => r.owner)).size > 1,
      );
      const stepsBy = (owner: string) => ran.filter((r) => r.owner === owner).length;
      console.log(
        `${at}: w1 ran ${stepsBy("w1")} steps, w2 ${stepsBy("w2")}; ` +
          `${handedOver.length}/${EXECUTIONS} executions changed hands; ` +
          `${ran.length - EXECUTIONS * ROUNDS} step re-runs; ` +
          `refused appends: ${refusals.map((r) => `${r.owner} ${r.code}`).join(", ") || "none"}`,
      );
      expect(handedOver, `${at}: every execution was driven by both workers in turn`).toEqual(ids);
      expect(errors, `${at}: background errors`).toEqual([]);
    } finally {
      await Promise.all(workers.map((w) => w.close()));
      await reader.close();
    }
  });
});
