/**
 * `npm run bench -- seam-flood [--dispatches 50] [--stalled 20] [--idle 300]`: how long a signed
 * dispatch takes to be accepted by a worker server while a client without the secret floods it
 * from another loopback address (issue 22: "a signed dispatch succeeding within 1 s").
 *
 * One worker server (worker-server.ts, memory store, a one-step flow) on 127.0.0.1, and a
 * legitimate RemoteWorkerRuntime. Each dispatch is timed from the `dispatch` call to its
 * `onAccepted` (the worker's signed 202: the start is durable), then awaited to its outcome
 * untimed. The baseline is the same N dispatches without a flood, in the same run; then the
 * attacker of bench/seam-flood-attacker.ts (the one test/security-seam.test.ts uses) floods from
 * 127.0.0.2 and the N dispatches are timed again. Target: floodMaxMs < 1000 (`under1s`).
 */
import {
  createRuntime,
  createWorkerServer,
  flow$,
  memoryStore,
  RemoteWorkerRuntime,
  type WorkerServer,
} from "../src/index.ts";
import { emit, intFlag, note, nowMs, parseFlags, round } from "./lib.ts";
import { flood, type Flood } from "./seam-flood-attacker.ts";

const SECRET = "a-bench-secret-of-some-length-0123";
const ATTACKER_ADDRESS = "127.0.0.2";
/** Warm-up dispatches before the baseline (connections, JIT), not counted. */
const WARMUP = 5;
/** As in the test: no request timeout cuts the flood's requests during the run. */
const REQUEST_TIMEOUT_MS = 120_000;

const doubler = flow$("bench-doubler", async (ctx, input: { n: number }) =>
  ctx.run("double", async () => input.n * 2),
);

interface Phase {
  samplesMs: number[];
  failed: number;
}

function percentile(samples: readonly number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

/** N sequential dispatches, each timed to its acceptance; a throw or a failed outcome is `failed`. */
async function dispatches(remote: RemoteWorkerRuntime, prefix: string, n: number): Promise<Phase> {
  const phase: Phase = { samplesMs: [], failed: 0 };
  for (let i = 0; i < n; i++) {
    const t0 = nowMs();
    let acceptedMs: number | undefined;
    try {
      const outcome = await remote.dispatch(
        { executionId: `${prefix}-${i}`, flow: doubler.name, input: { n: i } },
        { onAccepted: () => (acceptedMs = nowMs() - t0) },
      );
      if (outcome.status !== "completed" || acceptedMs === undefined) phase.failed++;
      else phase.samplesMs.push(acceptedMs);
    } catch (e) {
      phase.failed++;
      note(`${prefix}-${i} failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  return phase;
}

/** The worker, its server and a legitimate client; `close` ends them all. */
async function serving() {
  const store = memoryStore();
  const worker = createRuntime({ store, ownerId: "worker-a", closeStore: false });
  worker.registerFlow(doubler);
  const orchestrator = createRuntime({
    store: store.reopen(),
    ownerId: "orchestrator",
    background: false,
    closeStore: false,
  });
  const server: WorkerServer = createWorkerServer({
    runtime: worker,
    secret: SECRET,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
  });
  const url = await server.listen(0, "127.0.0.1");
  const remote = new RemoteWorkerRuntime({ url, secret: SECRET, runtime: orchestrator });
  const close = async () => {
    await remote.close();
    await server.close();
    await orchestrator.close();
    await worker.close();
  };
  return { url, remote, close };
}

const stats = (phase: Phase) => ({
  p50: round(percentile(phase.samplesMs, 0.5)),
  p99: round(percentile(phase.samplesMs, 0.99)),
  max: round(percentile(phase.samplesMs, 1)),
});

export async function seamFloodBench(argv: readonly string[]): Promise<void> {
  const flags = parseFlags(argv, ["dispatches", "stalled", "idle"]);
  const n = intFlag(flags, "dispatches", 50);
  const stalled = intFlag(flags, "stalled", 20);
  const idle = intFlag(flags, "idle", 300);
  const { url, remote, close } = await serving();
  let attacker: Flood | undefined;
  try {
    await dispatches(remote, "warmup", WARMUP);
    note(`seam-flood: ${n} dispatches without a flood (baseline)`);
    const baseline = await dispatches(remote, "baseline", n);
    note(`seam-flood: flooding from ${ATTACKER_ADDRESS}: ${stalled} stalled, ${idle} idle`);
    attacker = flood(url, ATTACKER_ADDRESS, stalled, idle);
    await attacker.flooding;
    const openedBefore = attacker.opened();
    note(`seam-flood: ${n} dispatches during the flood (${attacker.held()} sockets held)`);
    const flooded = await dispatches(remote, "flood", n);
    const reopened = attacker.opened() - openedBefore;
    attacker.stop();
    const b = stats(baseline);
    const f = stats(flooded);
    emit({
      name: "seam-flood",
      dispatches: n,
      baselineP50Ms: b.p50,
      baselineP99Ms: b.p99,
      floodP50Ms: f.p50,
      floodP99Ms: f.p99,
      floodMaxMs: f.max,
      failed: baseline.failed + flooded.failed,
      attackerSocketsOpenedDuringFlood: reopened,
      under1s: flooded.failed === 0 && f.max < 1000,
    });
  } finally {
    attacker?.stop();
    await close();
  }
}
