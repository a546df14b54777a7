/**
 * `npm run demo`: the research assistant on SQLite, with a crash in the middle.
 *
 * 1. A worker process starts the flow; after two searches complete it is killed with SIGKILL.
 * 2. A new worker process recovers the execution from the log alone.
 * 3. The flow suspends to ask the user for an angle; this process answers with `resume`, and
 *    an LLM streams the summary (a local fake server unless ANTHROPIC_API_KEY or OPENAI_API_KEY
 *    is set), shown live as it streams.
 * 4. The timeline shows every step completed exactly once, and the ledger of real tool calls
 *    shows that completed steps never ran again (a step in flight at the kill runs again:
 *    steps are at least once, their recorded results used exactly once).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRuntime, timeline } from "loomwork";
import { sqliteStore } from "loomwork/sqlite";

const dir = mkdtempSync(join(tmpdir(), "loom-demo-"));
const db = join(dir, "loom.db");
const ledger = join(dir, "ledger.txt");
const id = "research-1";
const worker = join(import.meta.dirname, "demo-worker.ts");

function spawnWorker(mode?: "start"): { child: ChildProcess; output: Promise<string> } {
  const args = ["--import", "tsx", worker, db, id, ...(mode ? [mode] : [])];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, LOOM_DEMO_LEDGER: ledger },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  const output = new Promise<string>((resolve) => child.on("exit", () => resolve(out)));
  return { child, output };
}

const say = (s: string) => console.log(`\n== ${s}`);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const observer = createRuntime({ store: sqliteStore(db), background: false });

async function completedSteps(): Promise<number> {
  const log = await observer.readLog(id).catch(() => []);
  return log.filter((e) => e.kind === "STEP_COMPLETED").length;
}

say("worker 1 starts the research flow");
const first = spawnWorker("start");
while ((await completedSteps()) < 3) await pause(20);
first.child.kill("SIGKILL");
await first.output;
say(
  `worker 1 killed with SIGKILL after ${await completedSteps()} completed steps (plan + 2 searches)`,
);

say("worker 2 starts and recovers the execution from the log");
const second = spawnWorker();
while ((await observer.getState(id)).status !== "parked") await pause(50);
say('the flow asks the user for an angle; answering { angle: "physics" }');
await observer.resume(id, { angle: "physics" });
const result = (await second.output).trim();
say(`outcome: ${result}`);

const log = await observer.readLog(id);
say("timeline");
for (const row of timeline(log)) {
  console.log(
    `${String(row.seq).padStart(3)}  +${String(row.offsetMs).padStart(5)} ms  ${row.text}`,
  );
}
const ran = readFileSync(ledger, "utf8").trim().split("\n");
say("each step: recorded completions / real executions");
const steps = new Map<string, string>();
for (const e of log) {
  // A fast step is one STEP_COMPLETED; a long one has its STEP_STARTED first (R9).
  const p = e.payload as { callId?: string; input?: unknown };
  if (!e.kind.startsWith("STEP_") || !p.callId || steps.has(p.callId)) continue;
  const name = p.callId.replace(/#\d+$/, "");
  steps.set(p.callId, name === "search" ? `search:${String(p.input)}` : name);
}
for (const [callId, ledgerKey] of steps) {
  const completions = log.filter(
    (e) => e.kind === "STEP_COMPLETED" && (e.payload as { callId?: string }).callId === callId,
  ).length;
  const executions = ran.filter((r) => r === ledgerKey).length;
  const why = executions > 1 ? "  (in flight at the kill, so it ran again)" : "";
  console.log(`  ${callId.padEnd(12)} ${completions} / ${executions}${why}`);
}
await observer.close();
rmSync(dir, { recursive: true, force: true });
if (!result.includes('"status":"completed"')) process.exit(1);
