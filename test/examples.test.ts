import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { memoryStore } from "../src/index.ts";
import { runtimes, slow, until } from "./helpers.ts";
import { execFile } from "./support/processes.ts";

const rt = runtimes();

describe("examples/research-assistant.ts (issue 6)", () => {
  it("without an API key, summarizes through the local fake model: streamed live, metered, priced", async () => {
    // No key: the example picks its local fake server, whatever this machine's environment says.
    delete process.env.ANTHROPIC_API_KEY;
    delete process.env.OPENAI_API_KEY;
    const { research } = await import("../examples/research-assistant.ts");
    const r = rt(memoryStore()).registerFlow(research);
    const h = await r.start(research, { topic: "tides" }, { id: "example-1" });
    await until(async () => (await r.getState("example-1")).status === "parked", 10_000);
    const live: string[] = [];
    const watching = (async () => {
      for await (const d of h.deltas()) live.push(d.text);
    })();
    await r.resume("example-1", { angle: "physics" });
    const outcome = await h.result();
    await watching;
    expect(outcome.status).toBe("completed");
    const out = outcome.output as {
      summary: string;
      tokens: { inputTokens: number; outputTokens: number };
      costUsd: number | null;
    };
    expect(out.summary).toContain("local fake model");
    expect(live.length).toBeGreaterThan(5);
    expect(live.join("")).toBe(out.summary);
    expect(out.tokens.inputTokens).toBe(64);
    expect(out.tokens.outputTokens).toBe(Math.ceil(out.summary.length / 4));
    expect(out.costUsd).toBeGreaterThan(0);
    const state = await r.getState("example-1");
    expect(state._resources?.tokens).toEqual({ input: 64, output: out.tokens.outputTokens });
  });
});

describe("examples/ai-sdk-agent-demo.ts (issue 27)", () => {
  it("an AI SDK agent killed between its tool calls is recovered: no tool runs twice, and it answers", async () => {
    const demo = join(import.meta.dirname, "..", "examples", "ai-sdk-agent-demo.ts");
    const { stdout } = await execFile(process.execPath, ["--import", "tsx", demo], {
      cwd: join(import.meta.dirname, ".."),
      timeoutMs: slow(60_000),
    });
    const summary = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as unknown;
    expect(summary).toEqual({
      killed: true,
      status: "completed",
      output: { text: "It is 18 °C in Lisbon: 64.4 °F.", modelCalls: 3 },
      // The first model call and weather were answered from the log; the second call, killed
      // before its answer, was asked again: 3 model calls, 4 requests.
      requests: 4,
      toolRuns: ["weather(Lisbon)", "convert(18)"],
    });
  });
});
