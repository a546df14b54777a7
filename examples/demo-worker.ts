/**
 * The demo's worker process: drives the research flow on the SQLite file it is given.
 * `start` starts the execution; without it the runtime's recovery picks up where the log is.
 */
import { createRuntime } from "loomwork";
import { sqliteStore } from "loomwork/sqlite";
import { research } from "./research-assistant.ts";

const [db, id, mode] = process.argv.slice(2);
if (!db || !id) throw new Error("usage: demo-worker.ts <db> <id> [start]");
const runtime = createRuntime({ store: sqliteStore(db), pollIntervalMs: 100 });
runtime.registerFlow(research);
if (mode === "start") await runtime.start(research, { topic: "tides" }, { id });
// The summary streams here live (the log holds only the step's final result).
const live = (async () => {
  let started = false;
  for await (const d of runtime.deltas(id)) {
    if (!started) process.stderr.write("   summary, live: ");
    started = true;
    process.stderr.write(d.text);
  }
  if (started) process.stderr.write("\n");
})();
const outcome = await runtime.waitForCompletion(id);
await live;
process.stdout.write(`${JSON.stringify(outcome)}\n`);
await runtime.close();
