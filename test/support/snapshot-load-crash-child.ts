/**
 * The crash child of test/redteam-snapshot-load.test.ts: a conversation resumed uncached on every
 * turn (cache `maxExecutions: 0`, so each turn reads its state back: load-state.ts L2, L3) on a
 * SQLite file, with a snapshot policy small enough that nearly every turn's batches carry one.
 *
 *   node --import tsx snapshot-load-crash-child.ts <dbPath> <ranPath> <turns>
 *
 * Starts (or attaches to) execution "conv", recovers it if a killed child left it mid-turn, and
 * resumes it with `m<n>` (n the RESUMED events its log holds) until it has had `turns` turns,
 * then "bye". Each turn's step prints "turn <t>" on stderr and appends `<t>` to `ranPath` as it
 * begins. Prints the outcome as one JSON line on stdout and exits 0.
 */
import { appendFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { createRuntime, flow$ } from "../../src/index.ts";
import { sqliteStore } from "../../src/store/sqlite/index.ts";

const [dbPath, ranPath, turnsArg] = process.argv.slice(2);
if (dbPath === undefined || ranPath === undefined || turnsArg === undefined) {
  throw new Error("usage: snapshot-load-crash-child.ts <dbPath> <ranPath> <turns>");
}
const ran = ranPath;
const TURNS = Number(turnsArg);

/** The value after turn `t` given message `msg`: a hash chain, so the output checks data flow. */
const link = (previous: string, msg: string): string =>
  createHash("sha256").update(`${previous}|${msg}`).digest("hex").slice(0, 16);

const conv = flow$("conv", async (ctx) => {
  let value = "seed";
  for (let t = 0; ; t++) {
    const msg = await ctx.suspend<string>();
    if (msg === "bye") return value;
    const previous = value;
    value = await ctx.run("turn", async () => {
      process.stderr.write(`turn ${t}\n`);
      appendFileSync(ran, `${t}\n`);
      await new Promise((r) => setTimeout(r, t % 3));
      return link(previous, msg);
    });
  }
});

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const runtime = createRuntime({
    store: sqliteStore(dbPath as string),
    pollIntervalMs: 20,
    snapshotEvery: 3,
    cache: { maxExecutions: 0 },
    onError: (e) => process.stderr.write(`loom error: ${e.message}\n`),
  });
  runtime.registerFlow(conv);
  await runtime.start(conv, null, { id: "conv" });
  // A killed child's lease names a dead process on this host: taken over at once (W6).
  await runtime.recoverAbandoned();
  for (;;) {
    const state = await runtime.getState("conv");
    if (state.status === "completed") break;
    if (state.status !== "parked") {
      await pause(2);
      continue;
    }
    const log = await runtime.readLog("conv");
    const resumed = log.filter((e) => e.kind === "RESUMED").length;
    await runtime.resume("conv", resumed >= TURNS ? "bye" : `m${resumed}`);
  }
  const outcome = await runtime.waitForCompletion("conv");
  process.stdout.write(`${JSON.stringify(outcome)}\n`);
  await runtime.close();
}

await main();
