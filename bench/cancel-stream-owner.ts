/**
 * The owner process of `npm run bench -- cancel`'s cross-process stream modes
 * (cancel-stream.ts): drives, on a SQLite file, the stream flows of cancel-stream-flows.ts
 * against the bench's fake server. On stdin it reads `<kind> <id>` to start one, or `exit`; on
 * stdout it says `ready` once (a JSON line).
 *
 *   node --import tsx cancel-stream-owner.ts <db> <baseURL>
 */
import { createInterface } from "node:readline";
import { createRuntime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { streamFlows, type StreamKind } from "./cancel-stream-flows.ts";

const [db = "", baseURL = ""] = process.argv.slice(2);
const flows = streamFlows(baseURL);
const runtime = createRuntime({ store: sqliteStore(db) });
runtime.registerFlow(flows.native).registerFlow(flows["ai-sdk"]);
createInterface({ input: process.stdin }).on("line", (line) => {
  if (line === "exit") {
    void runtime.close().then(() => process.exit(0));
    return;
  }
  const [kind, id] = line.split(" ") as [StreamKind, string];
  void runtime.start(flows[kind], null, { id });
});
process.stdout.write(`${JSON.stringify({ event: "ready" })}\n`);
