/**
 * An owner process for the cross-process cancel tests: drives one execution whose step waits ten
 * minutes, on a SQLite file or on a PostgreSQL schema, and reports on stdout (one JSON line each)
 * when the step starts and when its signal aborts, with the wall time, so the test can measure
 * the cancel's latency. On PostgreSQL it polls for notices only once a minute: a cancel reaches it
 * in time only through the store's wake (LISTEN/NOTIFY).
 * Usage: tsx cancel-child.ts <db> <executionId>  |  tsx cancel-child.ts pg <url> <schema> <id>
 */
import { createRuntime, flow$, step$ } from "../../src/index.ts";
import { sqliteStore } from "../../src/store/sqlite/index.ts";
import { postgresStore } from "../../src/store/postgres/index.ts";

const args = process.argv.slice(2);
const onPostgres = args[0] === "pg";
const id = (onPostgres ? args[3] : args[1]) ?? "";
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
const runtime = createRuntime(
  onPostgres
    ? {
        store: await postgresStore({ connectionString: args[1] ?? "", schema: args[2] ?? "" }),
        ownerId: "owner-process",
        noticePollMs: 60_000,
      }
    : { store: sqliteStore(args[0] ?? ""), ownerId: "owner-process" },
);
runtime.registerFlow(f);
await runtime.start(f, null, { id });
process.on("SIGTERM", () => void runtime.close().then(() => process.exit(0)));
