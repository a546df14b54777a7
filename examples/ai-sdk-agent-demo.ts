/**
 * `npx tsx examples/ai-sdk-agent-demo.ts`: the AI SDK agent of ai-sdk-agent.ts, killed between
 * its two tool calls and recovered by a new process.
 *
 * 1. Loom's fake OpenAI server stands in for the model (no key, no network): asked once, it
 *    calls `weather`; given the weather, it calls `convert`; given both, it answers.
 * 2. Worker 1 starts the agent. The moment it asks the model for its second step (weather has
 *    run, and is recorded), it is killed with SIGKILL: convert has not run.
 * 3. Worker 2 recovers the execution from the SQLite log. The first model call and the weather
 *    tool are answered from the log (no request, no second run); the second model call, which
 *    was never answered, is asked again; convert runs, and the model answers.
 *
 * The last line is a JSON summary (the suite checks it: test/examples.test.ts).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fakeOpenAi, type FakeOpenAiOptions } from "loomwork/testing";

const dir = mkdtempSync(join(tmpdir(), "loom-ai-sdk-"));
const db = join(dir, "agent.db");
const say = (s: string) => console.log(`\n== ${s}`);

/** What the fake model answers, given the tool results the conversation holds so far. */
function modelScript(body: { messages?: unknown }): FakeOpenAiOptions {
  const messages = (Array.isArray(body.messages) ? body.messages : []) as { role: string }[];
  const results = messages
    .filter((m) => m.role === "tool")
    .map((m) => JSON.parse(String((m as { content?: unknown }).content)) as Record<string, number>);
  const [weather, converted] = results;
  if (weather === undefined) {
    return { text: "", toolCalls: [{ id: "call_1", name: "weather", input: { city: "Lisbon" } }] };
  }
  if (converted === undefined) {
    const input = { celsius: weather.celsius };
    return { text: "", toolCalls: [{ id: "call_2", name: "convert", input }] };
  }
  return { text: `It is ${weather.celsius} °C in Lisbon: ${converted.fahrenheit} °F.` };
}

let running: ChildProcess | undefined;
let killed = false;
const fake = await fakeOpenAi({
  respond(body) {
    const answer = modelScript(body);
    // Worker 1 asks for the second step: weather has run. Kill it before it gets an answer.
    if (answer.toolCalls?.[0]?.name === "convert" && running && !killed) {
      killed = running.kill("SIGKILL");
      say("worker 1 killed with SIGKILL between the tool calls (weather ran, convert did not)");
    }
    return answer;
  },
});

const toolRuns: string[] = [];
function startWorker(mode?: "start") {
  const script = join(import.meta.dirname, "ai-sdk-agent.ts");
  const args = ["--import", "tsx", script, db, fake.baseURL, ...(mode ? [mode] : [])];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  running = child;
  let last = "";
  createInterface({ input: child.stdout }).on("line", (line) => {
    if (line.startsWith("tool ran: ")) {
      toolRuns.push(line.slice("tool ran: ".length));
      console.log(`   ${line}`);
    } else last = line;
  });
  // Its last line once it has ended: the outcome, or "" for a worker killed first.
  return new Promise<string>((resolve) => child.on("close", () => resolve(last)));
}

say("worker 1 starts the agent");
await startWorker("start");

say("worker 2 recovers the execution from the log");
const outcome = JSON.parse(await startWorker()) as {
  status: string;
  output?: { text: string; modelCalls: number };
};
say(`the agent answered: ${outcome.output?.text ?? JSON.stringify(outcome)}`);
const requests = fake.requests.length;
console.log(`   model requests the server saw: ${requests} (3 calls; the killed one asked twice)`);
console.log(`   tool executions: ${toolRuns.join(", ")}`);

const { status, output } = outcome;
console.log(JSON.stringify({ killed, status, output, requests, toolRuns }));
await fake.close();
rmSync(dir, { recursive: true, force: true });
