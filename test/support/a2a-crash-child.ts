/**
 * An owner process for the A2A crash test (issue 21 item 8): a flow sends one message to a remote
 * agent the test runs and returns what it answered. `start` starts it and waits to be killed;
 * `recover` recovers it on the same SQLite file and prints its outcome as one JSON line.
 * Usage: tsx a2a-crash-child.ts <db> <agentUrl> start|recover <orphans: cancel|resubscribe> <stream: yes|no>
 */
import { createRuntime, flow$ } from "../../src/index.ts";
import { createA2AEffect } from "../../src/providers/a2a.ts";
import { sqliteStore } from "../../src/store/sqlite/index.ts";

const [db = "", url = "", mode = "", orphans = "", stream = ""] = process.argv.slice(2);
const remote = createA2AEffect({
  url,
  stream: stream === "yes",
  pollIntervalMs: 20,
  orphans: orphans === "resubscribe" ? "resubscribe" : "cancel",
});
const asker = flow$("asker", async (ctx) => {
  const answer = await ctx.execute(remote, { text: "hold on, then echo" }, { retry: false });
  return { text: answer.text, state: answer.state, taskId: answer.taskId ?? null };
});
const runtime = createRuntime({ store: sqliteStore(db), background: false });
runtime.registerFlow(asker);
if (mode === "start") {
  await runtime.start(asker, null, { id: "ask-1" });
  await new Promise(() => undefined);
} else {
  await runtime.recoverAbandoned();
  const outcome = await runtime.waitForCompletion("ask-1");
  process.stdout.write(`${JSON.stringify(outcome)}\n`);
  await remote.close();
  await runtime.close();
}
