/**
 * An AI SDK agent made durable with loomwork/ai-sdk: `generateText` with two tools (a weather
 * lookup and a unit conversion) runs inside a Loom flow. Wrapping the model in `durableModel`
 * makes each model call a recorded step; wrapping the tools in `durableTools` makes each tool
 * execution one. Kill the process anywhere: a new one answers what the log holds from the log
 * and runs only what had not completed.
 *
 * This file is the worker: `node --import tsx examples/ai-sdk-agent.ts <db> <baseURL> start`
 * starts the agent on a SQLite file; without `start` it recovers what a killed worker left.
 * `examples/ai-sdk-agent-demo.ts` runs the whole story against Loom's fake OpenAI server.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, isStepCount, tool } from "ai";
import { createRuntime, flow$ } from "loomwork";
import { durableModel, durableTools } from "loomwork/ai-sdk";
import { sqliteStore } from "loomwork/sqlite";
import { z } from "zod";

const [db, baseURL, mode] = process.argv.slice(2);
if (!db || !baseURL) throw new Error("usage: ai-sdk-agent.ts <db> <baseURL> [start]");

// Any AI SDK model of the v4 specification; here OpenAI's, pointed at the demo's server.
const model = durableModel(createOpenAI({ baseURL, apiKey: "demo" }).chat("gpt-4o-mini"));

// Plain AI SDK tools. Each says when it really runs, so the demo can count executions.
const tools = durableTools({
  weather: tool({
    description: "The temperature in a city, in degrees Celsius",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      console.log(`tool ran: weather(${city})`);
      return { city, celsius: 18 };
    },
  }),
  convert: tool({
    description: "Degrees Celsius in Fahrenheit",
    inputSchema: z.object({ celsius: z.number() }),
    execute: async ({ celsius }) => {
      console.log(`tool ran: convert(${celsius})`);
      return { fahrenheit: (celsius * 9) / 5 + 32 };
    },
  }),
});

// The agent loop is the AI SDK's own; the flow makes it durable.
export const agent = flow$("weather-agent", async (_ctx, question: string) => {
  const { text, steps } = await generateText({
    model,
    tools,
    stopWhen: isStepCount(5),
    prompt: question,
  });
  return { text, modelCalls: steps.length };
});

const runtime = createRuntime({ store: sqliteStore(db) });
runtime.registerFlow(agent);
if (mode === "start") {
  await runtime.start(agent, "How warm is it in Lisbon, in Fahrenheit?", { id: "agent-1" });
} else {
  // Picks up every execution whose owner is gone: the one the killed worker left.
  await runtime.recoverAbandoned();
}
const outcome = await runtime.waitForCompletion("agent-1");
console.log(JSON.stringify(outcome));
await runtime.close();
