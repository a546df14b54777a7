/**
 * The owner process of `npm run bench -- cancel` (cross-process mode): drives executions on a
 * SQLite file, one at a time, each a step that waits ten minutes unless aborted. On stdin it
 * reads an id to start; on stdout it says (JSON lines) when that step is running and when its
 * signal aborted, with the time on the machine's wall clock in fractional milliseconds.
 */
import { createInterface } from "node:readline";
import { createRuntime, flow$, step$ } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";

const db = process.argv[2] ?? "";
const at = () => performance.timeOrigin + performance.now();
const say = (fields: Record<string, string | number>) =>
  process.stdout.write(`${JSON.stringify(fields)}\n`);

const wait = step$("wait", async (id: string, { signal }) => {
  say({ event: "running", id, at: at() });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, 600_000);
    signal.addEventListener("abort", () => {
      const abortedAt = at();
      clearTimeout(timer);
      say({ event: "aborted", id, at: abortedAt });
      reject(new Error("aborted"));
    });
  });
});
const long = flow$("bench-cancel", async (ctx, id: string) => ctx.execute(wait, id));
const runtime = createRuntime({ store: sqliteStore(db) });
runtime.registerFlow(long);
createInterface({ input: process.stdin }).on("line", (id) => {
  if (id === "exit") void runtime.close().then(() => process.exit(0));
  else void runtime.start(long, id, { id });
});
say({ event: "ready", at: at() });
