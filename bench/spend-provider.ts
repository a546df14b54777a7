/**
 * `bench spend`'s paths where what was spent is the provider's to say: parallel LLM calls against
 * the fake Anthropic server, and an owner stopped in the middle of every attempt and recovered on
 * a SQLite file (test/spend-paths.test.ts and test/spend-crash.test.ts drive the same).
 *
 * Invariants:
 * P1. The LLM path's real spend is counted at the server, from the requests it answered, with the
 *     usage it reports for each; never from what the effect returned.
 * P2. A stopped attempt is billed its whole reservation (spend-fakes.ts S1): a provider bills
 *     what it generated for a client that went away.
 */
import { join } from "node:path";
import { createRuntime, flow$, type LlmInput, type Runtime } from "../src/index.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { fakeAnthropic } from "../src/testing/index.ts";
import { withTempDir } from "./lib.ts";
import {
  hangingCall,
  recordedTokens,
  refusals,
  refusedOr,
  tokensOf,
  withoutReserve,
  withRuntime,
  type PathDriver,
} from "./spend-fakes.ts";
import { BUDGET } from "./spend-paths.ts";

const TEXT_CHARS = 1600;
const INPUT_TOKENS = 10;

/** (8) Eight LLM calls at once through anthropicEffect, maxTokens 500, answers of 1,600 chars. */
export const llmParallelPath: PathDriver = async (reserving) => {
  const server = await fakeAnthropic({
    text: "x".repeat(TEXT_CHARS),
    deltaChars: 400,
    inputTokens: INPUT_TOKENS,
  });
  try {
    const llm = anthropicEffect({ model: "claude-sonnet-4-6", baseURL: server.baseURL });
    const effect = reserving ? llm : withoutReserve(llm);
    const input: LlmInput = { messages: [{ role: "user", content: "hi" }], maxTokens: 500 };
    const f = flow$("spend-llm", async (ctx) =>
      ctx.parallel(
        Array.from(
          { length: 8 },
          () => async (c: typeof ctx) =>
            c.execute(effect, input, { retry: false }).then(() => "answered", refusedOr),
        ),
      ),
    );
    return await withRuntime({}, async (r) => {
      const h = await r.start(f, undefined, { id: "llm", budget: { tokens: BUDGET } });
      await h.result();
      // P1: the fake reports input_tokens and ceil(text / 4) output tokens for every request.
      const billedEach = INPUT_TOKENS + Math.ceil(TEXT_CHARS / 4);
      return {
        budget: BUDGET,
        realSpent: server.requests.length * billedEach,
        recordedSpent: await recordedTokens(r, "llm"),
        reservation: tokensOf(llm.reserve?.(input)),
        calls: server.requests.length,
        refusals: await refusals(r),
      };
    });
  } finally {
    await server.close();
  }
};

async function until(cond: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const giveUp = Date.now() + 10_000;
  while (!(await cond())) {
    if (Date.now() > giveUp) throw new Error(`spend path crash: ${what} did not happen in time`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/**
 * (9) An owner stopped in the middle of every attempt: its runtime closes while the call hangs,
 * and a new runtime on the same SQLite file recovers the run, until the budget refuses or
 * `maxStops` stops (a call that reserves nothing is never charged for a stop, so it never is).
 */
export function crashPath(maxStops: number): PathDriver {
  return (reserving) =>
    withTempDir(async (dir) => {
      const tool = hangingCall(reserving);
      const f = flow$("spend-stopped", async (ctx) =>
        ctx.execute(tool.effect, null, { retry: false }).catch(refusedOr),
      );
      const db = join(dir, "spend.db");
      const open = () => {
        const r = createRuntime({ store: sqliteStore(db), background: false, leaseTtlMs: 50 });
        r.registerFlow(f);
        return r;
      };
      const ended = async (r: Runtime) =>
        ["completed", "failed", "cancelled"].includes((await r.getState("stopped")).status);
      for (let stop = 0; stop < maxStops; stop++) {
        const r = open();
        try {
          if (stop === 0)
            await r.start(f, undefined, { id: "stopped", budget: { tokens: BUDGET } });
          else await r.recoverAbandoned();
          await until(async () => tool.spent.calls > stop || (await ended(r)), "an attempt");
          if (await ended(r)) break;
        } finally {
          await r.close();
        }
      }
      const r = open();
      try {
        return {
          budget: BUDGET,
          realSpent: tool.spent.real,
          recordedSpent: await recordedTokens(r, "stopped"),
          reservation: tool.reservation,
          calls: tool.spent.calls,
          refusals: await refusals(r),
        };
      } finally {
        await r.close();
      }
    });
}
