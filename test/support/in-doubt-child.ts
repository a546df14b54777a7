/**
 * A process for the in-doubt test: `crash` mode starts a payment flow whose `charge` step writes
 * the idempotency key it saw to a file, says "inside" and hangs (the test kills it with
 * SIGKILL); `recover` mode recovers the execution on the same SQLite file and prints its outcome
 * as JSON. Usage: tsx in-doubt-child.ts <db> <keysFile> crash|recover atMostOnce|idempotent
 */
import { appendFileSync } from "node:fs";
import { createRuntime, flow$, isLoomError, step$ } from "../../src/index.ts";
import { sqliteStore } from "../../src/store/sqlite/index.ts";

const [db = "", keys = "", mode = "", flavor = ""] = process.argv.slice(2);

const charge = step$(
  "charge",
  async (_: null, ectx) => {
    appendFileSync(keys, `${ectx.idempotencyKey}\n`);
    if (mode === "crash") {
      process.stdout.write("inside\n");
      await new Promise(() => undefined);
    }
    return "charged";
  },
  { atMostOnce: flavor === "atMostOnce" },
);
const pay = flow$("pay", async (ctx) =>
  ctx.execute(charge, null).catch((e: unknown) => ({ failed: isLoomError(e) ? e.code : "?" })),
);
const runtime = createRuntime({ store: sqliteStore(db), background: false });
runtime.registerFlow(pay);
if (mode === "crash") {
  await runtime.start(pay, null, { id: "pay-1" });
} else {
  await runtime.recoverAbandoned();
  const outcome = await runtime.waitForCompletion("pay-1");
  process.stdout.write(`${JSON.stringify(outcome)}\n`);
  await runtime.close();
}
