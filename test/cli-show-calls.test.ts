/**
 * `loom show <id> --step NAME`, `loom show <id> --llm` and `loom ui --module M`, end to end (like
 * test/cli.test.ts): the real CLI in a child process. The executions are made in process on the
 * same database file, the LLM calls by a real SDK against the fake provider server.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseCommand } from "../src/cli/args.ts";
import { UsageError } from "../src/cli/cli-error.ts";
import { createRuntime, flow$, step$, streamTokenBudget, type Runtime } from "../src/index.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { fakeAnthropic, type FakeAnthropic } from "../src/testing/index.ts";
import type { StepDetail } from "../src/analytics/step-detail.ts";
import type { Conversation } from "../src/analytics/conversation.ts";
import { twoSteps } from "./fixtures/cli/flows.ts";
import { FLOWS, loom, oneErrorLine, start, tempDirs, until } from "./fixtures/cli/spawn.ts";

const tempDir = tempDirs("loom-cli-calls-");
const servers: FakeAnthropic[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const openDb = (cwd: string): Runtime =>
  createRuntime({ store: sqliteStore(join(cwd, "loom.db")), background: false });

const flaky = step$("flaky", async (q: string, ectx) => {
  ectx.meter({ tokens: { input: 10, output: 1 }, costUsd: 0.00028 });
  if (ectx.attempt < 2) throw new Error(`overloaded (attempt ${ectx.attempt})`);
  return `answer to ${q}`;
});
const twice = flow$("twice", async (ctx) => {
  const retry = { initialDelayMs: 5, maxDelayMs: 20 };
  return [await ctx.execute(flaky, "a", { retry }), await ctx.execute(flaky, "b", { retry })];
});

const ask = {
  system: "You are terse.",
  messages: [{ role: "user" as const, content: "weather in Oslo?" }],
  tools: [{ name: "weather", description: "Today's weather", inputSchema: {} }],
};

/** An execution with an LLM call that asks for a tool, and one whose second call is severed. */
async function llmExecutions(runtime: Runtime): Promise<void> {
  const tools = await fakeAnthropic({
    text: "Let me check.",
    inputTokens: 20,
    toolCalls: [{ id: "call_1", name: "weather", input: { city: "Oslo" } }],
  });
  const long = await fakeAnthropic({ text: "x".repeat(400), inputTokens: 10 });
  servers.push(tools, long);
  const model = "claude-sonnet-4-6";
  const llm = anthropicEffect({ provider: "anthropic", model, baseURL: tools.baseURL });
  const cut = anthropicEffect({
    provider: "anthropic",
    model,
    baseURL: long.baseURL,
    guard: streamTokenBudget(40),
  });
  const agent = flow$("agent", async (ctx) => {
    const first = await ctx.execute(llm, ask);
    return [first.text, await ctx.execute(cut, ask).catch(() => "cut")];
  });
  runtime.registerFlow(agent);
  await (await runtime.start(agent, null, { id: "agent-1" })).result();
}

describe("loom show --step and --llm", () => {
  it("--step prints a call in full, or every call of a step name; --json prints StepDetail; an unknown name lists the calls", async () => {
    const cwd = tempDir();
    const setup = openDb(cwd).registerFlow(twice);
    await (await setup.start(twice, null, { id: "t-1" })).result();
    await setup.close();
    const [one, named, oneJson, namedJson, unknown] = await Promise.all([
      loom(cwd, "show", "t-1", "--step", "flaky#1"),
      loom(cwd, "show", "t-1", "--step", "flaky"),
      loom(cwd, "show", "t-1", "--step", "flaky#0", "--json"),
      loom(cwd, "show", "t-1", "--step", "flaky", "--json"),
      loom(cwd, "show", "t-1", "--step", "nope"),
    ]);
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^call\s+flaky#1 \(step flaky\)$/m);
    expect(one.stdout).toMatch(/^status\s+completed$/m);
    expect(one.stdout).toMatch(/^input\s+"b"$/m);
    expect(one.stdout).toMatch(/^output\s+"answer to b"$/m);
    // Metering summed over both attempts, the cost to four significant digits (N1).
    expect(one.stdout).toMatch(/^metering\s+tokens 20 in, 2 out, cost \$0\.00056/m);
    expect(one.stdout).toMatch(/^fork at\s+\d+ \(`loom fork t-1 \d+` runs this call again\)$/m);
    expect(one.stdout).toContain("attempts (2)");
    expect(one.stdout).toMatch(/^ {2}1\s+\S+\s+\d+ ms\s+LOOM_APPLICATION Error: overloaded/m);
    expect(one.stdout).toMatch(/^ {2}2\s+\S+\s+\d+ ms\s+ok$/m);
    expect(named.code).toBe(0);
    expect(named.stdout.split("\n")[0]).toBe(`2 calls of step "flaky": flaky#0, flaky#1`);
    expect(named.stdout).toContain('"answer to a"');
    expect(named.stdout).toContain('"answer to b"');
    const detail = JSON.parse(oneJson.stdout) as StepDetail;
    expect(detail).toMatchObject({ callId: "flaky#0", status: "completed", sealed: false });
    expect(detail.attempts).toHaveLength(2);
    expect(detail.metering.costUsd).toBeCloseTo(0.00056, 12);
    const all = JSON.parse(namedJson.stdout) as StepDetail[];
    expect(all.map((d) => d.callId)).toEqual(["flaky#0", "flaky#1"]);
    expect(unknown.code).toBe(1);
    expect(oneErrorLine(unknown)).toBe(
      `loom: execution "t-1" has no call or step named "nope" (its calls: flaky#0, flaky#1)`,
    );
  });

  it("--llm prints each LLM call as its conversation: system, messages, tool calls, answer, tokens, price, severed", async () => {
    const cwd = tempDir();
    const setup = openDb(cwd);
    await llmExecutions(setup);
    await setup.close();
    const [text, json, none] = await Promise.all([
      loom(cwd, "show", "agent-1", "--llm"),
      loom(cwd, "show", "agent-1", "--llm", "--json"),
      loom(cwd, "show", "agent-1", "--step", "llm#0"),
    ]);
    expect(text.code).toBe(0);
    const [first, second] = text.stdout.split("\n\n");
    expect(first).toContain("LLM call llm#0 (claude-sonnet-4-6)");
    expect(first).toContain("  system: You are terse.");
    expect(first).toContain("  tools: weather");
    expect(first).toContain("  [user] weather in Oslo?");
    expect(first).toContain("  answer: Let me check.");
    expect(first).toContain('    tool call weather {"city":"Oslo"} (id call_1)');
    expect(first).toContain("    stop: tool_use");
    expect(first).toMatch(/ {2}tokens: 20 in, \d+ out/);
    expect(first).toMatch(/ {2}price: \$0\.\d{1,6} \(/);
    expect(second).toContain("LLM call llm#1");
    expect(second).toMatch(/ {2}severed by a budget mid-stream: step "llm#1" was severed/);
    expect(second).toContain("  status: failed");
    const conversations = JSON.parse(json.stdout) as (Conversation & { callId: string })[];
    expect(conversations.map((c) => c.callId)).toEqual(["llm#0", "llm#1"]);
    expect(conversations[0]?.answer?.toolCalls).toEqual([
      { id: "call_1", name: "weather", input: { city: "Oslo" } },
    ]);
    expect(conversations[1]?.severed).toMatch(/severed mid-stream/);
    // --step on an LLM call prints the call and its conversation.
    expect(none.stdout).toContain("LLM call llm#0");
    expect(none.stdout).toMatch(/^metering\s+tokens \d+ in, \d+ out, cost \$/m);
  });

  it("--step and --llm together, or an empty --step, are usage errors", () => {
    expect(() => parseCommand(["show", "x", "--step", "a", "--llm"])).toThrow(UsageError);
    expect(() => parseCommand(["show", "x", "--step", ""])).toThrow(UsageError);
    expect(parseCommand(["show", "x", "--step", "a#0"])).toMatchObject({ step: "a#0", llm: false });
    expect(() => parseCommand(["ls", "--llm"])).toThrow(UsageError);
  });
});

describe("loom ui --module", () => {
  it("registers the module's flows: the dashboard lists them and reruns one, which a plain dashboard refuses with 409", async () => {
    const cwd = tempDir();
    const setup = openDb(cwd);
    await (await setup.start(twoSteps, { name: "ui" }, { id: "u-1" })).result();
    await setup.close();
    const withModule = start(cwd, ["ui", "--port", "0", "--module", FLOWS]);
    const plain = start(cwd, ["ui", "--port", "0"]);
    try {
      const signInOf = async (ui: typeof plain) => {
        await until("the sign-in URL", () => /^loom ui: sign in at \S+\n/m.test(ui.stdout()));
        const signIn = new URL(/^loom ui: sign in at (\S+)$/m.exec(ui.stdout())?.[1] ?? "");
        const token = signIn.searchParams.get("token") ?? "";
        return { url: signIn.origin, headers: { authorization: `Bearer ${token}` } };
      };
      const a = await signInOf(withModule);
      const b = await signInOf(plain);
      expect(withModule.stderr()).toMatch(/with flows [a-z, -]*two-steps[a-z, -]* from /);
      const listed = await fetch(`${a.url}/api/flows`, { headers: a.headers });
      const flows = (await listed.json()) as { flows: { name: string }[] };
      expect(flows.flows.map((f) => f.name)).toContain("two-steps");
      const post = (to: { url: string; headers: Record<string, string> }) =>
        fetch(`${to.url}/api/executions/u-1/rerun`, {
          method: "POST",
          headers: { ...to.headers, "content-type": "application/json" },
          body: JSON.stringify({ newId: "u-2" }),
        });
      const refused = await post(b);
      expect(refused.status).toBe(409);
      expect(await refused.text()).toContain("loom ui --module");
      const made = await post(a);
      expect(made.status).toBe(200);
      expect(((await made.json()) as { executionId: string }).executionId).toBe("u-2");
    } finally {
      withModule.child.kill("SIGTERM");
      plain.child.kill("SIGTERM");
    }
    await Promise.all([withModule.exited, plain.exited]);
    const check = openDb(cwd);
    try {
      // Recorded, not driven: a dashboard runs no background loop (ui/made.ts M3).
      expect((await check.getState("u-2")).status).toBe("pending");
    } finally {
      await check.close();
    }
  });
});
