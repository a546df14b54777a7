import { encode } from "gpt-tokenizer";
import { describe, expect, it } from "vitest";
import {
  collectStream,
  flow$,
  isLoomError,
  memoryStore,
  QuotaExceededError,
  streamTokenBudget,
  type Effect,
} from "../src/index.ts";
import { runtimes, until } from "./helpers.ts";

const rt = runtimes();

/** A provider of one's own: deltas from an async generator that honours its request's signal. */
function provider(deltas: string[]) {
  const seen = { yielded: 0, abortedAt: -1 };
  async function* stream(signal: AbortSignal): AsyncGenerator<string> {
    for (const d of deltas) {
      await new Promise((r) => setTimeout(r, 1));
      if (signal.aborted) {
        seen.abortedAt = seen.yielded;
        return;
      }
      seen.yielded++;
      yield d;
    }
  }
  return { stream, seen };
}

describe("collectStream: a guard after every delta of any provider's stream (issue 6)", () => {
  it("returns the whole text of a stream that runs to its end, and meters nothing itself", async () => {
    const { stream } = provider(["tides ", "rise ", "and ", "fall"]);
    const llm: Effect<null, string> = {
      name: "custom-llm",
      run: (_input, ectx) =>
        collectStream(ectx, stream, { guard: streamTokenBudget(1000), inputTokens: 3 }),
    };
    const f = flow$("custom", async (ctx) => ctx.execute(llm, null));
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "custom-1" })).result();
    expect(out.output).toBe("tides rise and fall");
    // Only the wall time the runtime meters for every effect: no tokens from collectStream.
    const metered = (await r.readLog("custom-1")).filter((e) => e.kind === "RESOURCE_METERED");
    expect(metered).toHaveLength(1);
    expect(metered[0]?.payload).toHaveProperty("delta.wallMs");
    expect(metered[0]?.payload).not.toHaveProperty("delta.tokens");
  });

  it("a real tokenizer (gpt-tokenizer) swaps in for characters / 4, and the breach is severed at its count", async () => {
    const deltas = Array.from({ length: 200 }, (_, i) => `word${i} and, `);
    const { stream, seen } = provider(deltas);
    const counted: string[] = [];
    const tokens = (delta: string) => {
      counted.push(delta);
      return encode(delta).length;
    };
    const llm: Effect<null, string> = {
      name: "custom-llm",
      run: (_input, ectx) =>
        collectStream(ectx, stream, {
          guard: streamTokenBudget(60, { estimate: tokens }),
          inputTokens: 5,
        }),
    };
    const f = flow$("tokenized", async (ctx) =>
      ctx.execute(llm, null, { retry: false }).then(
        () => "finished",
        (e: unknown) => (e instanceof QuotaExceededError ? "quota" : "other"),
      ),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "tokenized-1" })).result();
    expect(out.output).toBe("quota");
    const log = await r.readLog("tokenized-1");
    const quota = log.find((e) => e.kind === "QUOTA_EXCEEDED")?.payload as {
      projected: number;
      estimated: boolean;
    };
    // The figure is the tokenizer's count of each delta, once each (not the whole text again
    // after every delta), plus the input.
    const sum = (ds: string[]) => ds.reduce((n, d) => n + encode(d).length, 0);
    expect(quota.estimated).toBe(true);
    expect(counted).toEqual(deltas.slice(0, seen.yielded));
    expect(quota.projected).toBe(5 + sum(counted));
    expect(quota.projected).toBeGreaterThan(60);
    // It differs from characters / 4 here, so the swap is what decided.
    expect(quota.projected).not.toBe(5 + Math.ceil(counted.join("").length / 4));
    // Severed at the first delta past the budget: the deltas before it were within budget.
    expect(5 + sum(counted.slice(0, -1))).toBeLessThanOrEqual(60);
    expect(seen.yielded).toBeLessThan(deltas.length);
  });

  it("a guard that breaks (not a quota) severs the stream once and is not retried", async () => {
    let opened = 0;
    const { stream } = provider(Array.from({ length: 50 }, () => "abcd"));
    const llm: Effect<null, string> = {
      name: "custom-llm",
      run: (_input, ectx) =>
        collectStream(
          ectx,
          (signal) => {
            opened++;
            return stream(signal);
          },
          {
            guard: streamTokenBudget(1000, {
              estimate: () => {
                throw new TypeError("tokenizer bug");
              },
            }),
          },
        ),
    };
    const f = flow$("broken-guard", async (ctx) =>
      ctx
        .execute(llm, null, { retry: { initialDelayMs: 1, jitter: 0 } })
        .catch((e: unknown) => (isLoomError(e) ? `${e.code}: ${e.message}` : "other")),
    );
    const r = rt(memoryStore()).registerFlow(f);
    const out = await (await r.start(f, null, { id: "broken-1" })).result();
    expect(out.output).toMatch(/^LOOM_TERMINAL: .*tokenizer bug/);
    expect(opened).toBe(1);
  });

  it("a cancel aborts the provider's request through the signal it was given", async () => {
    const { stream, seen } = provider(Array.from({ length: 5000 }, () => "x"));
    const llm: Effect<null, string> = {
      name: "custom-llm",
      run: (_input, ectx) => collectStream(ectx, stream),
    };
    const f = flow$("cancelled", async (ctx) => ctx.execute(llm, null));
    const r = rt(memoryStore()).registerFlow(f);
    const h = await r.start(f, null, { id: "cancelled-1" });
    for await (const d of h.deltas()) {
      expect(d.text).toBe("x");
      if (seen.yielded >= 10) break;
    }
    expect(await h.cancel("enough")).toBe(true);
    const outcome = await h.result();
    expect(outcome.error?.code).toBe("LOOM_CANCELLED");
    await until(() => seen.abortedAt >= 0, 1000);
    expect(seen.abortedAt).toBeGreaterThanOrEqual(10);
    expect(seen.yielded).toBeLessThan(5000);
    const metered = (await r.readLog("cancelled-1")).find((e) => e.kind === "RESOURCE_METERED")
      ?.payload as { delta: { estimated?: boolean } };
    expect(metered.delta.estimated).toBe(true);
  });
});
