/**
 * Writes test/fixtures/logs/<EVENT_SCHEMA_VERSION>-golden.json: the log of a flow that uses every
 * syscall and effect feature, and the state the current fold gives it. Run it once when the
 * schema version is bumped (`npx tsx scripts/make-golden.ts`); it never overwrites a file, since
 * a golden log of an earlier version must replay forever (STYLE 6).
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
const llm = step$("llm", async (prompt: string, ectx) => {
  ectx.meter({ tokens: { input: prompt.length, output: 20 }, costUsd: 0.002 });
  if (ectx.attempt < 3) throw new Error(`overloaded (attempt ${ectx.attempt})`);
  return `notes on ${prompt}`;
});
const golden = flow$(
  "golden",
  async (ctx, input: { topic: string }) => {
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
    const answer = await ctx.suspend<string>();
    return { pick, notes, grant, scoped, answer, at: ctx.now() };
  },
  { budget: { tokens: 1000 }, deadlineMs: 3_600_000 },
);

const store = memoryStore();
const runtime = createRuntime({ store, clock });
runtime.registerFlow(golden);
await runtime.start(golden, { topic: "tides" }, { id: "golden-1" });
for (let i = 0; i < 500; i++) {
  if ((await runtime.getState("golden-1")).status === "parked") break;
  await new Promise((r) => setTimeout(r, 10));
}
await runtime.resume("golden-1", "high tide at noon");
const outcome = await runtime.waitForCompletion("golden-1");
if (outcome.status !== "completed") throw new Error(`golden flow ended ${outcome.status}`);
const events = await runtime.readLog("golden-1");
await runtime.close();
writeFileSync(
  file,
  `${JSON.stringify({ schemaVersion: EVENT_SCHEMA_VERSION, events, state: foldAll(events) }, null, 1)}\n`,
);
console.log(`wrote ${file}: ${events.length} events`);
