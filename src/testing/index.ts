/**
 * `loomwork/testing`: what a user's own tests need. Local stand-ins for the Anthropic and
 * OpenAI APIs (the official SDKs pointed at them by `baseURL`), and the store conformance suite
 * every store passes (`runStoreConformance`, `runFleetConformance`; vitest is an optional peer
 * that only the suite needs).
 */
export {
  fakeAnthropic,
  type FakeAnthropic,
  type FakeAnthropicOptions,
  type FakeRequest,
  type FakeToolCall,
} from "./fake-anthropic.ts";
export { fakeOpenAi, type FakeOpenAi, type FakeOpenAiOptions } from "./fake-openai.ts";
export {
  runStoreConformance,
  runFleetConformance,
  type StoreConformanceOptions,
  type FleetConformanceOptions,
} from "./conformance/index.ts";
