/**
 * loomwork/ai-sdk across a crash (issue 27): a `generateText` tool loop in a flow, its model a
 * durableModel over `@ai-sdk/openai` (on Loom's fake OpenAI server, run here so that it counts
 * the requests of every process) and its tools durableTools. The owner process is SIGKILLed
 * while tool c runs, after a and b completed and were recorded; a new process recovers the
 * execution from the SQLite file. AM2 (the SDK gets the recorded answer, so no model call it
 * recorded is sent again), AT1, AT2 (a recorded tool is answered from the log, never run again).
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { fakeOpenAi, type FakeOpenAi, type FakeOpenAiOptions } from "../src/testing/index.ts";
import { expectReplayEquality, stepNameOf, until } from "./helpers.ts";
import { ownerProcess, type OwnerProcess } from "./support/processes.ts";

const FIXTURE = join(import.meta.dirname, "fixtures", "ai-sdk", "tool-loop.ts");
const children = new Set<ChildProcess>();
const open: Runtime[] = [];
const servers: FakeOpenAi[] = [];
afterEach(async () => {
  for (const c of children) c.kill("SIGKILL");
  children.clear();
  await Promise.all(open.splice(0).map((r) => r.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

interface Message {
  role: string;
  content?: unknown;
}

/**
 * The model's script: tool a, then b, then c, one per call, each called once the conversation
 * holds the result of the one before; then an answer that quotes every tool result it was sent.
 */
function script(body: { messages?: unknown }): FakeOpenAiOptions {
  const messages = (Array.isArray(body.messages) ? body.messages : []) as Message[];
  const results = messages.filter((m) => m.role === "tool").map((m) => String(m.content));
  const next = ["a", "b", "c"][results.length];
  if (next === undefined) return { text: `Done. I was told: ${results.join(" ")}` };
  return {
    text: "",
    toolCalls: [{ id: `call_${next}`, name: next, input: { n: results.length } }],
  };
}

async function fake(): Promise<FakeOpenAi> {
  const f = await fakeOpenAi({ respond: script });
  servers.push(f);
  return f;
}

function folder(prefix: string) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { db: join(dir, "loom.db"), side: join(dir, "side.txt") };
}

const ranTools = (side: string) =>
  existsSync(side) ? readFileSync(side, "utf8").trim().split("\n").filter(Boolean) : [];

function owner(args: string[]): OwnerProcess {
  return ownerProcess(FIXTURE, args, children);
}

async function outcomeOf(o: OwnerProcess): Promise<{ status: string; output: unknown }> {
  await o.exit;
  const line = o.out().trim().split("\n").at(-1) ?? "";
  return JSON.parse(line) as { status: string; output: unknown };
}

describe("an AI SDK tool loop survives SIGKILL between tool calls (issue 27)", () => {
  it("AM2, AT1, AT2: recovery sends no recorded model call again, runs no recorded tool again, and answers as an uncrashed run", async () => {
    // The uncrashed run: 4 model calls (a, b, c, the answer), each tool once.
    const calm = await fake();
    const plain = folder("loom-ai-sdk-calm-");
    const uncrashed = await outcomeOf(
      owner([plain.db, calm.baseURL, plain.side, "agent-1", "run"]),
    );
    expect(uncrashed.status).toBe("completed");
    expect(calm.requests).toHaveLength(4);
    expect(ranTools(plain.side)).toEqual(["a", "b", "c"]);

    // The crashed run, on a server of its own so that its requests are counted alone.
    const server = await fake();
    const { db, side } = folder("loom-ai-sdk-crash-");
    const first = owner([db, server.baseURL, side, "agent-1", "run", "--block-c"]);
    await until(() => first.out().includes("blocked in c") || first.exited(), 30_000);
    expect(first.exited()).toBe(false);
    // Killed while c runs: a and b completed and are in the log.
    const observer = createRuntime({ store: sqliteStore(db), background: false });
    open.push(observer);
    const before = await observer.readLog("agent-1");
    const completed = before.filter((e) => e.kind === "STEP_COMPLETED").map(stepNameOf);
    expect(completed).toEqual(["llm", "tool:a", "llm", "tool:b", "llm"]);
    first.p.kill("SIGKILL");
    await first.exit;
    // Three model calls sent (the third asked for c), two tools run.
    expect(server.requests).toHaveLength(3);
    expect(ranTools(side)).toEqual(["a", "b"]);

    const recovered = await outcomeOf(owner([db, server.baseURL, side, "agent-1", "recover"]));
    expect(recovered.status).toBe("completed");
    // One request per model call in all: the recovery sent only the fourth (the answer).
    expect(server.requests).toHaveLength(4);
    // a and b ran once; c, in flight at the kill (it had not reached its append), ran once.
    expect(ranTools(side)).toEqual(["a", "b", "c"]);
    expect(recovered.output).toEqual(uncrashed.output);
    expect(recovered.output).toMatchObject({
      text: 'Done. I was told: {"tool":"a","value":0} {"tool":"b","value":10} {"tool":"c","value":20}',
      steps: 4,
    });
    // The recovery's requests carried what the log holds: its one request's conversation is
    // the uncrashed run's last.
    expect(server.requests[3]?.body).toEqual(calm.requests[3]?.body);
    await expectReplayEquality(observer, "agent-1");
  });
});
