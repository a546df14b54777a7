/**
 * Writes test/fixtures/logs/<EVENT_SCHEMA_VERSION>-golden.json: the log of a flow that uses every
 * syscall and effect feature, and the state the current fold gives it; since 1.5.0 also the
 * logs of the chain generations it continued as (`chain`); since 1.6.0 its suspend is answered by
 * `resumeAs`, so the log holds a STATE_RESTORED; since 1.7.0 it spawns and awaits a child; since
 * 1.8.0 it holds a data subject's data and its logs end with the SUBJECT_ERASED that erasing the
 * subject appends (the logs are read before the erasure, so their payloads are the plain ones a
 * reader with the subject's key saw, and the erasure's fact is added from after it); since 1.9.0
 * its effect reserves under the budget, and `others` holds the log of a run stopped in the middle
 * of a reserving call and recovered (its crashed attempt charged), and a fork of it with a budget
 * of its own; since 1.10.0 the stopped call notes a fact before it stops (a STEP_NOTED), the attempt
 * that recovers it reads it, and `others` also holds its log as it stood when it stopped, so its
 * state keeps the note on the running step; since 1.11.0 its steps' events leave out the `scope`
 * and `name` their call ids give (and the fork's recovered attempt no longer expects the note
 * F13 drops at a fork point); since 1.12.0 `others` also holds queued executions (debounced,
 * admitted, cancelled while queued, and a chain whose successor keeps its slot); since 1.13.0 its
 * states keep each plainly settled call by its value alone (`_settled`, fold/settled.ts L1). Run it
 * once when the schema version is bumped (`npx tsx scripts/make-golden.ts`); it never overwrites
 * a file, since a golden log of an earlier version must replay forever (STYLE 6).
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  createRuntime,
  EVENT_SCHEMA_VERSION,
  flow$,
  foldAll,
  memoryStore,
  step$,
  type Envelope,
} from "../src/index.ts";

const file = join(
  import.meta.dirname,
  "..",
  "test",
  "fixtures",
  "logs",
  `${EVENT_SCHEMA_VERSION}-golden.json`,
);
if (existsSync(file)) {
  console.error(`${file} exists; a golden log is never rewritten`);
  process.exit(1);
}

let t = 1_800_000_000_000;
const clock = { now: () => (t += 7) };
// Since 1.9.0 it reserves what a call may spend, so its starts under the budget record it.
const llm = {
  ...step$("llm", async (prompt: string, ectx) => {
    ectx.meter({ tokens: { input: prompt.length, output: 20 }, costUsd: 0.002 });
    if (ectx.attempt < 3) throw new Error(`overloaded (attempt ${ectx.attempt})`);
    return `notes on ${prompt}`;
  }),
  reserve: (prompt: string) => ({ tokens: { input: prompt.length, output: 20 } }),
};
const helper = flow$("golden-helper", async (ctx, n: number) => ctx.run("double", () => n * 2));
const golden = flow$(
  "golden",
  async (ctx, input: { topic: string; gen?: number; before?: unknown }) => {
    if (input.gen === 1) {
      // Generation 1 (schema 1.5.0): a receive that waits, then the answer with what it carried.
      const msg = await ctx.receive<string>();
      return { ...(input.before as object), msg };
    }
    const plan = await ctx.run("plan", () => [`${input.topic} history`, `${input.topic} today`], {
      timeoutMs: 60_000,
    });
    const pick = await ctx.decide("pick", () => plan.length);
    const notes = await ctx.parallel(
      plan.map((q) => (c: typeof ctx) => c.execute(llm, q, { retry: { initialDelayMs: 1 } })),
    );
    const grant = await ctx.negotiateBudget("tokens", 200, { ceiling: 2000 });
    const scoped = await ctx.nestedBudget("search", { tokens: 100 }, (c) =>
      c.execute(llm, "scoped", { retry: { initialDelayMs: 1 } }),
    );
    await ctx.sleep(1);
    // Schema 1.7.0: a child, spawned and awaited (CHILD_STARTED, a wait on it, CHILD_DONE).
    const child = await ctx.awaitChild<number>(await ctx.spawn(helper, 20, { key: "helper" }));
    const answer = await ctx.suspend<string>();
    const first = await ctx.receive<string>();
    const before = { pick, notes, grant, scoped, child, answer, first, at: ctx.now() };
    return ctx.continueAsNew({ topic: input.topic, gen: 1, before });
  },
  { budget: { tokens: 1000 }, deadlineMs: 3_600_000 },
);

const store = memoryStore();
const runtime = createRuntime({
  store,
  clock,
  features: { continueAsNew: true },
  closeStore: false,
});
runtime.registerFlow(helper).registerFlow(golden);
await runtime.start(golden, { topic: "tides" }, { id: "golden-1", subject: "golden-subject" });
for (let i = 0; i < 500; i++) {
  if ((await runtime.getState("golden-1")).status === "parked") break;
  await new Promise((r) => setTimeout(r, 10));
}
await runtime.send("golden-1", "first message", { key: "m1" });
// Schema 1.6.0: the suspend is answered by resumeAs, which records a STATE_RESTORED first.
await runtime.resumeAs("golden-1", golden, "high tide at noon", {
  transformState: (state) => ({
    ...state,
    _decisions: Object.fromEntries(
      Object.entries(state._decisions).map(([k, v]) => [k, k.startsWith("pick") ? 100 : v]),
    ),
  }),
});
const outcome = await runtime.waitForCompletion("golden-1");
if (outcome.status !== "continued") throw new Error(`golden flow ended ${outcome.status}`);
for (let i = 0; i < 500 && (await runtime.readLog("golden-1~1")).length === 0; i++) {
  await new Promise((r) => setTimeout(r, 10));
}
await runtime.send("golden-1", "first message, retried", { key: "m1" });
await runtime.send("golden-1", "second message", { key: "m2" });
const last = await runtime.waitForCompletion("golden-1~1");
if (last.status !== "completed") throw new Error(`golden successor ended ${last.status}`);
const events = await runtime.readLog("golden-1");
const successor = await runtime.readLog("golden-1~1");
// Schema 1.8.0: the erasure's fact, after each log's end.
await runtime.eraseSubject("golden-subject");
for (const [id, log] of [
  ["golden-1", events],
  ["golden-1~1", successor],
] as const) {
  const after = await runtime.readLog(id);
  log.push(...after.slice(log.length));
  if (log[log.length - 1]?.kind !== "SUBJECT_ERASED") throw new Error(`${id}: no erasure`);
}
await runtime.close();
const chain = [{ id: "golden-1~1", events: successor, state: foldAll(successor) }];

// Schema 1.9.0: a run stopped in the middle of a reserving call; the runtime that recovers it
// charges the attempt its reservation ("crashed-attempt") before the call runs again.
let stops = 1;
// The recovered attempt reads the note; a fork's does not (fold/fork-point.ts F13 drops it).
let noteExpected = true;
const hang = {
  ...step$("hang", async (_: null, ectx) => {
    // Schema 1.10.0: a fact noted mid-call, which the attempt that recovers the call reads.
    if (noteExpected && ectx.attempt > 1 && ectx.notes?.[0]?.note.remote !== "task-1") {
      throw new Error("golden-stopped: the recovered attempt did not read the note");
    }
    await ectx.note?.({ remote: `task-${ectx.attempt}` });
    if (stops-- > 0)
      await new Promise((_r, reject) => ectx.signal.addEventListener("abort", reject));
    ectx.meter({ tokens: { output: 5 } });
    return "done";
  }),
  reserve: () => ({ tokens: { output: 50 } }),
};
const stopped = flow$("golden-stopped", async (ctx) => ctx.execute(hang, null, { retry: false }), {
  budget: { tokens: 500 },
});
const before = createRuntime({ store, clock, closeStore: false, leaseTtlMs: 1 }).registerFlow(
  stopped,
);
await before.start(stopped, null, { id: "golden-stopped" });
while (stops > 0) await new Promise((r) => setTimeout(r, 5));
await before.close();
const reader = createRuntime({ store, clock, closeStore: false });
const stoppedPrefix = await reader.readLog("golden-stopped");
await reader.close();
if (!stoppedPrefix.some((e) => e.kind === "STEP_NOTED")) throw new Error("golden-stopped: no note");
const after = createRuntime({ store, clock, leaseTtlMs: 1 }).registerFlow(stopped);
await after.recoverAbandoned();
if ((await after.waitForCompletion("golden-stopped")).status !== "completed") {
  throw new Error("golden-stopped did not complete");
}
const stoppedLog = await after.readLog("golden-stopped");
if (
  !stoppedLog.some((e) => (e.payload as { estimated?: unknown }).estimated === "crashed-attempt")
) {
  throw new Error("golden-stopped: no crashed attempt charged");
}
// And a fork of it with a smaller budget of its own (`meta.forkBudget` at the fork point).
noteExpected = false;
await after.fork("golden-stopped", 2, "golden-fork", { budget: { tokens: 300 } });
if ((await after.waitForCompletion("golden-fork")).status !== "completed") {
  throw new Error("golden-fork did not complete");
}
const forkLog = await after.readLog("golden-fork");
const queued = await queueLogs();
await after.close();
const others = [
  { id: "golden-stopped", events: stoppedLog, state: foldAll(stoppedLog) },
  { id: "golden-stopped@stop", events: stoppedPrefix, state: foldAll(stoppedPrefix) },
  { id: "golden-fork", events: forkLog, state: foldAll(forkLog) },
  ...queued.map(([id, log]) => ({ id, events: log, state: foldAll(log) })),
];
/**
 * Schema 1.12.0: a queued start debounced twice (two START_DEBOUNCED), admitted
 * (EXECUTION_ADMITTED) and run with the last input; a queued one cancelled before it was
 * admitted; a queued conversation that continued as new, whose successor holds its slot (QF4).
 */
async function queueLogs(): Promise<(readonly [string, Envelope[]])[]> {
  const key = () => "golden-key";
  const queue = { name: "golden-q", key };
  const once = flow$(
    "golden-queued",
    async (ctx, input: { text: string }) => ctx.run("echo", () => input.text),
    { queue },
  );
  const rotating = flow$(
    "golden-queued-chain",
    async (ctx, input: { gen?: number }) =>
      input.gen === 1 ? ctx.run("last", () => "rotated") : ctx.continueAsNew({ gen: 1 }),
    { queue },
  );
  const features = { continueAsNew: true };
  const recorder = createRuntime({ store, clock, closeStore: false, background: false, features });
  recorder.registerFlow(once).registerFlow(rotating);
  const debounce = { key: "golden-doc", ms: 40, maxMs: 80 };
  const first = await recorder.start(once, { text: "a" }, { debounce });
  await recorder.start(once, { text: "ab" }, { debounce });
  await recorder.start(once, { text: "abc" }, { debounce });
  const cancelled = await recorder.start(once, { text: "x" }, { id: "golden-queued-cancelled" });
  await cancelled.cancel("not needed");
  await recorder.start(rotating, {}, { id: "golden-queued-chain" });
  await recorder.close();
  const admitter = createRuntime({
    store,
    clock,
    closeStore: false,
    pollIntervalMs: 5,
    features,
    queues: { "golden-q": { concurrency: 1, keyConcurrency: 1 } },
  });
  admitter.registerFlow(once).registerFlow(rotating);
  for (const id of [first.id, "golden-queued-chain~1"]) {
    if ((await admitter.waitForCompletion(id)).status !== "completed") {
      throw new Error(
        `${id} did not complete: ${JSON.stringify(await admitter.waitForCompletion(id))}`,
      );
    }
  }
  const ids = [first.id, "golden-queued-cancelled", "golden-queued-chain", "golden-queued-chain~1"];
  const logs = await Promise.all(ids.map(async (id) => [id, await admitter.readLog(id)] as const));
  await admitter.close();
  return logs;
}

writeFileSync(
  file,
  `${JSON.stringify({ schemaVersion: EVENT_SCHEMA_VERSION, events, state: foldAll(events), chain, others }, null, 1)}\n`,
);
console.log(
  `wrote ${file}: ${events.length} events, ${successor.length} of its successor, ${stoppedLog.length} of golden-stopped`,
);
