/**
 * An owner process for the cross-process cancel test: drives one execution on a SQLite file whose
 * step waits ten minutes, and reports on stdout (one JSON line each) when the step starts and
 * when its signal aborts, with the wall time, so the test can measure the cancel's latency.
 * Usage: tsx cancel-child.ts <db> <executionId>
 */
import { createRuntime, flow$, step$ } from "../../src/index.ts";
import { sqliteStore } from "../../src/store/sqlite/index.ts";

const [db = "", id = ""] = process.argv.slice(2);
const say = (event: string) =>
  process.stdout.write(
    `${JSON.stringify({ event, at: performance.timeOrigin + performance.now() })}\n`,
  );

const tenMinutes = step$("ten-minutes", async (_: null, ectx) => {
  say("started");
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, 600_000);
    ectx.signal.addEventListener("abort", () => {
      clearTimeout(timer);
      say("aborted");
      reject(new Error("aborted"));
    });
  });
});
const f = flow$("long", async (ctx) => ctx.execute(tenMinutes, null));
const runtime = createRuntime({ store: sqliteStore(db), ownerId: "owner-process" });
runtime.registerFlow(f);
await runtime.start(f, null, { id });
process.on("SIGTERM", () => void runtime.close().then(() => process.exit(0)));
