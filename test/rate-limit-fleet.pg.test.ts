/**
 * Issue 26's rate limit across a fleet (runtime/rate-limits.ts RL1..RL4, store S30..S32): 3
 * worker processes on one PostgreSQL make 200 LLM calls through OpenAI's SDK to a fake provider
 * that counts output tokens per window and answers 429 past 10,000; the fleet's limiter is 10,000
 * output tokens per the same window. The provider answers no 429, and its count over any window
 * never passes the limit by more than one call's reservation.
 *
 * Each call reaches the provider once: no member dies, and the lease is long enough that none is
 * taken for dead.
 *
 * The window is 4 s, not a minute: the limiter and the provider agree on it, and nothing in
 * either depends on its length, so a minute's run would show the same in 15 times as long.
 */
import { afterAll, describe, expect, it } from "vitest";
import { createRuntime } from "../src/index.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { fakeOpenAi } from "../src/testing/fake-openai.ts";
import { llmCall } from "./fixtures/flow-control/flows.ts";
import { until } from "./helpers.ts";
import { startFcMember, type FcMember } from "./support/fc-fleet.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import { slow } from "./support/slowdown.ts";

const CALLS = 200;
const LIMIT = 10_000;
const WINDOW_MS = 4000;
const MAX_TOKENS = 260;
/** The fake's answer: 1,000 characters, 250 output tokens by its count (and the SDK's usage). */
const TEXT = "x".repeat(1000);
const members: FcMember[] = [];
afterAll(() => {
  for (const m of members) m.child.kill("SIGKILL");
});

/** The most output tokens the provider counted within any window ending at an arrival. */
function peakPerWindow(arrivals: readonly { atMs: number; outputTokens: number }[]): number {
  let peak = 0;
  for (const a of arrivals) {
    const sum = arrivals
      .filter((b) => b.atMs > a.atMs - WINDOW_MS && b.atMs <= a.atMs)
      .reduce((s, b) => s + b.outputTokens, 0);
    peak = Math.max(peak, sum);
  }
  return peak;
}

describe("a rate limit across a fleet on PostgreSQL (issue 26)", () => {
  it(
    "3 members, 200 LLM calls, 10,000 output tokens per window: no 429, never past the limit by more than one reservation",
    async () => {
      const url = pgUrl();
      const schema = schemaName("rl");
      const provider = await fakeOpenAi({
        text: TEXT,
        deltaChars: 200,
        rateLimit: { outputTokens: LIMIT, windowMs: WINDOW_MS },
      });
      const store = await postgresStore({ connectionString: url, schema });
      try {
        const flow = llmCall(provider.baseURL);
        const client = createRuntime({ store, background: false }).registerFlow(flow);
        for (let i = 0; i < CALLS; i++) {
          await client.start(flow, { n: i, maxTokens: MAX_TOKENS }, { id: `c${i}`, drive: false });
        }
        const env = {
          LOOM_FAKE_OPENAI: provider.baseURL,
          LOOM_FC_OUTPUT_TPM: String(LIMIT),
          LOOM_FC_WINDOW_MS: String(WINDOW_MS),
          // No member is killed here: a lease long enough that a loaded machine's stall is not
          // taken for a death (a takeover re-sends a call in flight, at least once by design;
          // CI saw 203 arrivals for 200 calls with the fleet tests' 2 s lease).
          LOOM_FLEET_TTL_MS: String(slow(10_000)),
        };
        members.push(...(await Promise.all([0, 1, 2].map(() => startFcMember(url, schema, env)))));
        await until(
          async () => (await client.list({ status: ["completed"], limit: 1000 })).length === CALLS,
          slow(180_000),
        );
        expect(provider.refused).toBe(0);
        const prompts = provider.arrivals.map((a) => a.prompt);
        expect(prompts.filter((p, i) => prompts.indexOf(p) !== i)).toEqual([]);
        expect(provider.arrivals.length).toBe(CALLS);
        const peak = peakPerWindow(provider.arrivals);
        expect(peak).toBeLessThanOrEqual(LIMIT + MAX_TOKENS);
        // Held near the limit, not far under it: the windows were used.
        expect(peak).toBeGreaterThan(LIMIT * 0.8);
        for (let i = 0; i < CALLS; i++) {
          expect(await client.handle(`c${i}`).result()).toMatchObject({
            status: "completed",
            output: TEXT.length,
          });
        }
        await client.close();
      } finally {
        // The members first: once the schema is dropped, a live one reports missing tables.
        for (const m of members) m.child.kill("SIGKILL");
        await store.close().catch(() => {});
        await provider.close();
        await dropSchema(url, schema);
      }
    },
    slow(300_000),
  );
});
