/**
 * `npm run bench -- ratelimit`: issue 26's rate limit across a fleet. W worker processes on one
 * PostgreSQL make C LLM calls through OpenAI's SDK to a fake provider that counts output tokens
 * per window and answers 429 past its limit; the fleet's limiter names the same limit. Printed:
 * the peak tokens the provider counted in any window (target: at most the limit plus one call's
 * reservation), utilization (tokens sent over the most a window-limited sender could send in the
 * run's span: limit x (span / window + 1); target >= 0.9), the p99 of each call's wait (from its
 * step's start to its request's arrival), and the 429s. Beside it, the baseline measured in the
 * same run: the same calls with no limiter (the SDK's retries off, Loom's retry middleware
 * retrying the 429s).
 *
 * `limitTpm` is the limit per minute the window stands for: with the default window of a minute it
 * is the limit itself (156 calls take about three minutes: at 260 tokens reserved and 250 used, a
 * window of 10,000 takes 39 calls, so 156 fill four windows; a count that leaves the last window
 * part empty lowers the utilization by what the workload, not the limiter, left unused); `--window-ms 6000` runs the same logic
 * ten times faster, where the time between a window's end and the next grant weighs ten times
 * more in the utilization.
 */
import { createRuntime, type Runtime } from "../src/index.ts";
import { foldAll } from "../src/fold/fold.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { fakeOpenAi, type FakeOpenAi } from "../src/testing/fake-openai.ts";
import { llmCall } from "../test/fixtures/flow-control/flows.ts";
import { startFcMember, type FcMember } from "../test/support/fc-fleet.ts";
import { dropSchema, schemaName } from "../test/support/postgres.ts";
import { emit, intFlag, latencyStats, note, parseFlags, UsageError } from "./lib.ts";

const TEXT = "y".repeat(1000);
const MAX_TOKENS = 260;

export async function rateLimitBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["workers", "calls", "limit", "window-ms"]);
  const workers = intFlag(flags, "workers", 3);
  const calls = intFlag(flags, "calls", 156);
  const limit = intFlag(flags, "limit", 10_000);
  const windowMs = intFlag(flags, "window-ms", 60_000);
  const url = process.env.LOOM_PG_URL;
  if (!url) throw new UsageError("bench ratelimit needs LOOM_PG_URL (PostgreSQL)");
  const run = { url, workers, calls, limit, windowMs };
  const limited = await oneRun(run, true);
  const baseline = await oneRun(run, false);
  emit({
    name: "ratelimit",
    workers,
    calls,
    windowMs,
    limitTpm: Math.round((limit * 60_000) / windowMs),
    peakTpm: Math.round((limited.peak * 60_000) / windowMs),
    reservationTokens: MAX_TOKENS,
    utilization: limited.utilization,
    p99WaitMs: limited.p99WaitMs,
    refused: limited.refused,
    spanMs: limited.spanMs,
    baseline: {
      peakTpm: Math.round((baseline.peak * 60_000) / windowMs),
      utilization: baseline.utilization,
      refused: baseline.refused,
      spanMs: baseline.spanMs,
    },
  });
}

interface Run {
  url: string;
  workers: number;
  calls: number;
  limit: number;
  windowMs: number;
}

async function oneRun(run: Run, limiter: boolean) {
  const schema = schemaName("rlbench");
  const provider = await fakeOpenAi({
    text: TEXT,
    deltaChars: 250,
    rateLimit: { outputTokens: run.limit, windowMs: run.windowMs },
  });
  const store = await postgresStore({ connectionString: run.url, schema });
  const members: FcMember[] = [];
  try {
    const flow = llmCall(provider.baseURL);
    const client = createRuntime({ store, background: false, closeStore: false });
    client.registerFlow(flow);
    for (let i = 0; i < run.calls; i++) {
      await client.start(flow, { n: i, maxTokens: MAX_TOKENS }, { id: `c${i}`, drive: false });
    }
    const env: Record<string, string> = { LOOM_FAKE_OPENAI: provider.baseURL };
    if (limiter) {
      env.LOOM_FC_OUTPUT_TPM = String(run.limit);
      env.LOOM_FC_WINDOW_MS = String(run.windowMs);
    }
    for (let i = 0; i < run.workers; i++) members.push(await startFcMember(run.url, schema, env));
    note(`${limiter ? "limited" : "baseline"}: ${run.workers} workers, ${run.calls} calls`);
    const ended = await waitForEnds(client, run.calls);
    const figures = await measure(client, provider, run);
    await client.close();
    return { ...figures, ended };
  } finally {
    for (const m of members) m.child.kill("SIGKILL");
    await store.close().catch(() => {});
    await provider.close();
    await dropSchema(run.url, schema);
  }
}

async function waitForEnds(client: Runtime, calls: number): Promise<number> {
  for (;;) {
    const open = await client.list({ status: ["pending", "running", "parked"], limit: 1 });
    if (open.length === 0) return calls;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function measure(client: Runtime, provider: FakeOpenAi, run: Run) {
  const arrivals = [...provider.arrivals].sort((a, b) => a.atMs - b.atMs);
  let peak = 0;
  for (const a of arrivals) {
    let sum = 0;
    for (const b of arrivals)
      if (b.atMs > a.atMs - run.windowMs && b.atMs <= a.atMs) sum += b.outputTokens;
    peak = Math.max(peak, sum);
  }
  const first = arrivals[0]?.atMs ?? 0;
  const spanMs = (arrivals.at(-1)?.atMs ?? 0) - first;
  const sent = arrivals.reduce((s, a) => s + a.outputTokens, 0);
  const allowed = run.limit * (spanMs / run.windowMs + 1);
  const waits: number[] = [];
  for (const a of arrivals) {
    const id = `c${/call (\d+)/u.exec(a.prompt)?.[1] ?? ""}`;
    const state = foldAll(await client.readLog(id));
    const started = Object.values(state.frames)[0]?.firstStartedAt;
    if (started !== undefined) waits.push(Math.max(0, a.atMs - started));
  }
  return {
    peak,
    spanMs,
    utilization: Math.round((sent / allowed) * 1000) / 1000,
    p99WaitMs: Math.round(latencyStats(waits).p99Us / 1000),
    refused: provider.refused,
  };
}
