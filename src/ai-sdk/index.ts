/**
 * `loomwork/ai-sdk`: durable AI SDK models and tools (`ai` and `@ai-sdk/provider` are optional
 * peers, imported here for their types only: importing this module loads neither).
 *
 * @example
 * const model = durableModel(openai.chat("gpt-4o-mini"), { guard: streamTokenBudget(4000) });
 * const agent = flow$("agent", async (ctx, question: string) => {
 *   const { text } = await generateText({ model, tools: durableTools({ search }), prompt: question, stopWhen: isStepCount(5) });
 *   return text;
 * });
 */
export { durableModel, type DurableModelOptions } from "./model.ts";
export { durableTools, type DurableToolsOptions } from "./tools.ts";
export { NotInFlowError } from "../kernel/errors.ts";
export { streamTokenBudget, type StreamGuard } from "../providers/stream.ts";
