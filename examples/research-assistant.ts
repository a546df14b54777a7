/**
 * An example agent: a research assistant. It plans, runs several tool steps, asks the user
 * which angle to take (a suspend answered by `loom resume`), waits a moment (a durable sleep)
 * and has an LLM write the summary, streamed under a token budget. Every step is durable: kill
 * the process anywhere and it picks up where the log says it was.
 *
 * The LLM is real when `ANTHROPIC_API_KEY` or `OPENAI_API_KEY` is set (`LOOM_DEMO_MODEL` picks
 * the model); otherwise it is a local fake server that speaks Anthropic's streaming API, so the
 * example runs with nothing to install and no network.
 */
import { appendFileSync } from "node:fs";
import {
  flow$,
  step$,
  streamTokenBudget,
  type Effect,
  type LlmInput,
  type LlmResult,
} from "loomwork";
import { anthropicEffect } from "loomwork/anthropic";
import { openAiEffect } from "loomwork/openai";
import { fakeAnthropic } from "loomwork/testing";

/** Where the demo counts real tool executions (to show that completed steps never re-run). */
const ledger = process.env.LOOM_DEMO_LEDGER;

function note(what: string): void {
  if (ledger) appendFileSync(ledger, `${what}\n`);
}

const search = step$("search", async (query: string, { signal }) => {
  note(`search:${query}`);
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, 400);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new Error("search aborted", { cause: signal.reason }));
    });
  });
  return { query, finding: `${query}: ${query.length * 7} sources agree` };
});

/** The summary step's budget: the stream is severed before it passes this many tokens. */
const TOKEN_BUDGET = 20_000;

async function chooseLlm(): Promise<Effect<LlmInput, LlmResult>> {
  const guard = streamTokenBudget(TOKEN_BUDGET);
  const model = process.env.LOOM_DEMO_MODEL;
  if (process.env.ANTHROPIC_API_KEY) {
    return anthropicEffect({ provider: "anthropic", model: model ?? "claude-sonnet-4-6", guard });
  }
  if (process.env.OPENAI_API_KEY) {
    return openAiEffect({ provider: "openai", model: model ?? "gpt-5-mini", guard });
  }
  const fake = await fakeAnthropic({
    text:
      "Tides are the sea answering the moon: two bulges of water, one under the moon and one " +
      "opposite, so most coasts see two highs a day. (Written by Loom's local fake model; set " +
      "ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one.)",
    deltaChars: 12,
    deltaMs: 20,
    inputTokens: 64,
  });
  return anthropicEffect({
    provider: "anthropic",
    model: "claude-sonnet-4-6",
    baseURL: fake.baseURL,
    guard,
  });
}

const llm = await chooseLlm();
/** The LLM call, counted in the ledger each time it really runs. */
const summarize: Effect<LlmInput, LlmResult> = {
  ...llm,
  name: "summarize",
  run(input, ectx) {
    note("summarize");
    return llm.run(input, ectx);
  },
};

export const research = flow$("research", async (ctx, input: { topic: string }) => {
  const plan = await ctx.run("plan", () => {
    note("plan");
    return ["history", "physics", "forecasts"].map((angle) => `${input.topic} ${angle}`);
  });
  const findings: { query: string; finding: string }[] = [];
  for (const query of plan) findings.push(await ctx.execute(search, query));
  const answer = await ctx.suspend<{ angle: string }>({ timeout: 10 * 60_000 });
  await ctx.sleep(1_000);
  const kept = findings.filter((f) => f.query.includes(answer.angle));
  const summary = await ctx.execute(summarize, {
    system: "You are a research assistant. Answer in two sentences.",
    maxTokens: 300,
    messages: [
      {
        role: "user",
        content: `Summarize, from the ${answer.angle} angle, what these findings say about ${input.topic}:\n${kept.map((f) => f.finding).join("\n")}`,
      },
    ],
  });
  return {
    topic: input.topic,
    angle: answer.angle,
    summary: summary.text,
    tokens: summary.usage,
    costUsd: summary.price?.usd ?? null,
  };
});
