/**
 * An owner process for the crashed-attempt spend test (issue 20): a flow with a token budget
 * makes one streamed LLM call to a fake Anthropic server the test runs. `start` starts it and
 * waits to be killed; `recover` recovers it on the same SQLite file and prints its outcome as
 * one JSON line (or is killed mid-stream too).
 * Usage: tsx spend-crash-child.ts <db> <baseURL> start|recover
 */
import { createRuntime, flow$, isLoomError } from "../../src/index.ts";
import { anthropicEffect } from "../../src/providers/anthropic.ts";
import { sqliteStore } from "../../src/store/sqlite/index.ts";

const [db = "", baseURL = "", mode = ""] = process.argv.slice(2);
const llm = anthropicEffect({ model: "claude-sonnet-4-6", baseURL, apiKey: "test" });
const spender = flow$("spender", async (ctx) =>
  ctx
    .execute(
      llm,
      { messages: [{ role: "user", content: "x".repeat(40) }], maxTokens: 300 },
      { retry: false },
    )
    .then((r) => ({ tokens: r.usage.inputTokens + r.usage.outputTokens }))
    .catch((e: unknown) => ({ refused: isLoomError(e) ? e.code : String(e) })),
);
const runtime = createRuntime({ store: sqliteStore(db), background: false });
runtime.registerFlow(spender);
if (mode === "start") {
  await runtime.start(spender, null, { id: "spend-1", budget: { tokens: 1000 } });
  await new Promise(() => undefined);
} else {
  await runtime.recoverAbandoned();
  const outcome = await runtime.waitForCompletion("spend-1");
  process.stdout.write(`${JSON.stringify(outcome)}\n`);
  await runtime.close();
}
