/**
 * `npm run bench -- cancel`'s stream modes (issue 27): from the `runtime.cancel` call to the
 * moment the provider sees its connection closed, for an LLM call streaming a long answer from
 * the fake OpenAI server (running in this process, so both instants are on one clock): made by
 * `streamText` over `durableModel` (loomwork/ai-sdk) beside Loom's native OpenAI effect, their
 * runs interleaved in the same run.
 *
 * - in-process: the runtime that drives the execution cancels it;
 * - cross-process: a second OS process on the same SQLite file drives it (cancel-stream-owner.ts);
 *   this one cancels, and the owner learns of it through its notice poll (50 ms by default).
 *
 * Target: the durable model's p99 within 100 ms cross-process (the issue's figure).
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { createRuntime, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { fakeOpenAi, type FakeOpenAi } from "../src/testing/index.ts";
import { STREAM_KINDS, streamFlows, type StreamKind } from "./cancel-stream-flows.ts";
import { emit, note, round } from "./lib.ts";

type Samples = Record<StreamKind, number[]>;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(samples: readonly number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

/** The request a start made (the `asked`-th), once its first delta went out. */
async function streaming(fake: FakeOpenAi, asked: number) {
  for (;;) {
    const request = fake.requests[asked];
    if (request && request.deltasSent >= 1) return request;
    await pause(1);
  }
}

/** Cancels `id` and returns the milliseconds until the server saw the request's close. */
async function cancelToClose(fake: FakeOpenAi, asked: number, runtime: Runtime, id: string) {
  const request = await streaming(fake, asked);
  const t0 = performance.now();
  await runtime.cancel(id, "bench");
  while (!request.closedEarly) await pause(1);
  return (request.closedAt ?? NaN) - t0;
}

async function inProcess(db: string, fake: FakeOpenAi, runs: number): Promise<Samples> {
  const flows = streamFlows(fake.baseURL);
  const runtime = createRuntime({ store: sqliteStore(db) });
  runtime.registerFlow(flows.native).registerFlow(flows["ai-sdk"]);
  const samples: Samples = { native: [], "ai-sdk": [] };
  try {
    // Run -1 warms each path up (the SDKs' first load, the first connection): not counted.
    for (let i = -1; i < runs; i++) {
      for (const kind of STREAM_KINDS) {
        const asked = fake.requests.length;
        const h = await runtime.start(flows[kind], null, { id: `in-${kind}-${i}` });
        const ms = await cancelToClose(fake, asked, runtime, h.id);
        if (i >= 0) samples[kind].push(ms);
        await h.result();
      }
    }
  } finally {
    await runtime.close();
  }
  return samples;
}

async function crossProcess(db: string, fake: FakeOpenAi, runs: number): Promise<Samples> {
  const owner = spawn(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "cancel-stream-owner.ts"), db, fake.baseURL],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  await new Promise<void>((ready) => createInterface({ input: owner.stdout }).once("line", ready));
  const runtime = createRuntime({ store: sqliteStore(db), background: false });
  const samples: Samples = { native: [], "ai-sdk": [] };
  try {
    for (let i = -1; i < runs; i++) {
      for (const kind of STREAM_KINDS) {
        const id = `cross-${kind}-${i}`;
        const asked = fake.requests.length;
        owner.stdin.write(`${kind} ${id}\n`);
        await streaming(fake, asked);
        // The step's start is written at the owner's next group commit: wait until it is durable.
        while ((await runtime.getState(id)).inFlight === 0) await pause(1);
        const ms = await cancelToClose(fake, asked, runtime, id);
        if (i >= 0) samples[kind].push(ms);
      }
    }
  } finally {
    owner.stdin.write("exit\n");
    await runtime.close();
  }
  return samples;
}

/** Both stream modes' lines, on the SQLite file `db`. */
export async function cancelStreamBench(db: string, runs: number): Promise<void> {
  note(`cancel: ${runs} streams of each kind (native, ai-sdk) in each mode`);
  // 1,000 deltas, 10 ms apart: ten seconds of answer, cancelled after its first delta.
  const fake = await fakeOpenAi({ text: "w".repeat(8000), deltaChars: 8, deltaMs: 10 });
  try {
    for (const mode of ["in-process", "cross-process"] as const) {
      const samples =
        mode === "in-process"
          ? await inProcess(db, fake, runs)
          : await crossProcess(db, fake, runs);
      const p99 = percentile(samples["ai-sdk"], 0.99);
      emit({
        name: "cancel-stream",
        mode,
        runs,
        aiSdkP50Ms: round(percentile(samples["ai-sdk"], 0.5)),
        aiSdkP99Ms: round(p99),
        nativeP50Ms: round(percentile(samples.native, 0.5)),
        nativeP99Ms: round(percentile(samples.native, 0.99)),
        target: "aiSdkP99Ms <= 100",
        pass: p99 <= 100,
      });
    }
  } finally {
    await fake.close();
  }
}
