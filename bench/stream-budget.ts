/**
 * `npm run bench -- stream-budget [--streams 100]`: streams severed by `streamTokenBudget`
 * (ADR 0020 A8) against the local fake Anthropic server, at several delta sizes.
 *
 * - maxOvershootDeltas: the most deltas any stream delivered past the last one that fit in the
 *   budget (target: at most 1, the delta that crossed).
 * - severP50Ms / severP99Ms: from the guard's breach to the server seeing the socket close
 *   (target: p99 <= 20 ms).
 * The baseline beside them, measured in the same run, is a complete stream of the same server: its
 * p50 time per delta.
 */
import {
  createRuntime,
  flow$,
  memoryStore,
  streamTokenBudget,
  type StreamGuard,
} from "../src/index.ts";
import { anthropicEffect } from "../src/providers/anthropic.ts";
import { fakeAnthropic } from "../src/testing/index.ts";
import { emit, intFlag, note, parseFlags, round } from "./lib.ts";

const pct = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(q * s.length) - 1)] ?? NaN;
};

export async function streamBudgetBench(argv: readonly string[]): Promise<void> {
  const streams = intFlag(parseFlags(argv, ["streams"]), "streams", 100);
  const sizes = [4, 16, 64];
  note(`stream-budget: ${streams} severed streams at delta sizes ${sizes.join(", ")} characters`);
  const server = await fakeAnthropic({ text: "z".repeat(8000), deltaMs: 1, inputTokens: 10 });
  const runtime = createRuntime({ store: memoryStore(), background: false, middleware: [] });
  const sever: number[] = [];
  let maxOvershoot = 0;
  try {
    for (let i = 0; i < streams; i++) {
      const deltaChars = sizes[i % sizes.length] ?? 16;
      const budget = 200 + (i % 7) * 37;
      server.set({ text: "z".repeat(8000), deltaChars, deltaMs: 1, inputTokens: 10 });
      let breachAt = 0;
      let seen = 0;
      const inner = streamTokenBudget(budget);
      const guard: StreamGuard = (progress) => {
        seen++;
        try {
          inner(progress);
        } catch (e) {
          breachAt = performance.now();
          throw e;
        }
      };
      const llm = anthropicEffect({
        provider: "anthropic",
        model: "claude-sonnet-4-6",
        baseURL: server.baseURL,
        guard,
      });
      const f = flow$(`sever-${i}`, async (ctx) =>
        ctx.execute(llm, { messages: [{ role: "user", content: "go" }] }).then(
          () => "finished",
          () => "severed",
        ),
      );
      runtime.registerFlow(f);
      const out = await (await runtime.start(f, null)).result();
      if (out.output !== "severed") throw new Error(`stream ${i} was not severed`);
      const request = server.requests[server.requests.length - 1];
      while (request && !request.closedEarly) await new Promise((r) => setTimeout(r, 1));
      sever.push((request?.closedAt ?? NaN) - breachAt);
      // Deltas that fit: input 10 tokens, then deltaChars / 4 tokens each.
      const fit = Math.floor(((budget - 10) * 4) / deltaChars);
      maxOvershoot = Math.max(maxOvershoot, seen - fit);
    }
    const baseline = await fullStreamMsPerDelta(server);
    emit({
      name: "stream-budget",
      streams,
      deltaSizes: sizes.join("/"),
      maxOvershootDeltas: maxOvershoot,
      severP50Ms: round(pct(sever, 0.5)),
      severP99Ms: round(pct(sever, 0.99)),
      baselineMsPerDelta: round(baseline, 3),
      target: "maxOvershootDeltas <= 1, severP99Ms <= 20",
      pass: maxOvershoot <= 1 && pct(sever, 0.99) <= 20,
    });
  } finally {
    await runtime.close();
    await server.close();
  }
}

/** A complete stream of 200 deltas, unguarded: its time per delta. */
async function fullStreamMsPerDelta(server: Awaited<ReturnType<typeof fakeAnthropic>>) {
  server.set({ text: "z".repeat(1600), deltaChars: 8, deltaMs: 1, inputTokens: 10 });
  const llm = anthropicEffect({
    provider: "anthropic",
    model: "claude-sonnet-4-6",
    baseURL: server.baseURL,
  });
  const runtime = createRuntime({ store: memoryStore(), background: false, middleware: [] });
  const f = flow$("baseline", async (ctx) =>
    ctx.execute(llm, { messages: [{ role: "user", content: "go" }] }),
  );
  runtime.registerFlow(f);
  const t0 = performance.now();
  await (await runtime.start(f, null)).result();
  const ms = (performance.now() - t0) / 200;
  await runtime.close();
  return ms;
}
