/**
 * The benchmarks' entry point: `npm run bench -- NAME [flags]`.
 *
 * Stdout is JSON lines only, the last line of each workload its summary; progress goes to
 * stderr. An unknown name or flag prints the usage and exits with status 2.
 */
import { UsageError } from "./lib.ts";
import { cancelBench } from "./cancel.ts";
import { codecBench } from "./codec.ts";
import { conversationBench } from "./conversation.ts";
import { fanoutBench } from "./fanout.ts";
import { fleetBench } from "./fleet.ts";
import { footprintBench } from "./footprint.ts";
import { middlewareBench } from "./middleware.ts";
import { rateLimitBench } from "./ratelimit.ts";
import { resumeBench } from "./resume.ts";
import { seamFloodBench } from "./seam-flood.ts";
import { simBench } from "./sim.ts";
import { spendBench } from "./spend.ts";
import { startBench } from "./start.ts";
import { streamBudgetBench } from "./stream-budget.ts";
import { stepsBench } from "./steps.ts";
import { storageBench } from "./storage.ts";
import { uiBench } from "./ui.ts";

const WORKLOADS: Record<string, (argv: readonly string[]) => Promise<void>> = {
  steps: stepsBench,
  resume: resumeBench,
  conversation: conversationBench,
  fanout: fanoutBench,
  fleet: fleetBench,
  middleware: middlewareBench,
  cancel: cancelBench,
  sim: simBench,
  codec: codecBench,
  "stream-budget": streamBudgetBench,
  ui: uiBench,
  footprint: footprintBench,
  spend: spendBench,
  "seam-flood": seamFloodBench,
  start: startBench,
  storage: storageBench,
  ratelimit: rateLimitBench,
};

const USAGE = `usage: npm run bench -- NAME [flags]

  steps   [--steps 1000] [--executions 100] [--steps-each 100] [--synchronous FULL|NORMAL]
          [--rounds 5] [--only seq|concurrent|both] [--store sqlite|postgres]
          steps-seq: N sequential steps on SQLite vs a raw better-sqlite3 loop; with
          --store postgres (needs LOOM_PG_URL), vs raw pg INSERTs of a step's row, seq only
          steps-concurrent: executions x steps-each at once vs the same flow run alone
  resume  [--turns 20000] [--store memory|sqlite] [--synchronous FULL|NORMAL] [--mode hot|parked]
          latency of resume -> step on one long-lived cached execution, turn 1000 vs the last
  resume --uncached [--turns N (default 1000, 6000 and 20000)] [--rounds 5] [--synchronous NORMAL|FULL]
          a replay: a resume with no cached body (a restart) of that execution at N turns, per
          event of its log, CPU and wall, split into load (read, parse, fold) and the body re-run,
          beside better-sqlite3 reading and parsing the same log; target <= 4 us at 6000 turns
  conversation [--turns 6000 --rotate 500|never] [--store memory|sqlite]
          the message loop addressed to a chain's first id, rotating with ctx.continueAsNew
          every R turns or never: per-resume latency at turn 1000 and the last, total time,
          head state and log size (ADR 0109); without --turns/--rotate, the ADR's three rows
  conversation --uncached [--turns N --rotate 500|never]
          the same loop with the body evicted before every resume (each resume replays), per
          generation (rotating) or sampled every 1000 turns (never), beside the body kept and the
          seed's 4.6 ms; without --turns/--rotate, 1000/6000/20000 turns rotating and never
  fanout  [--children 1000] [--store memory|sqlite]
          a parent spawns N children and awaits them all, beside N executions started and
          awaited from outside: total time and peak RSS
  fleet   [--flows 100] [--rounds 3] [--steps 500] [--starts 300] [--workers 1,2,3|none]
          [--claim-sizes 10000,100000,1000000|none] [--claim-samples 500]   (needs LOOM_PG_URL)
          steps per second of 1, 2 and 3 worker processes on PostgreSQL (--flows per worker),
          with the CPU of the workers and their backends per step (steps/s per busy core,
          perCoreRatio3to1) beside the machine's; one sequential step; a one-step flow started
          and awaited; the fleet claim's p50/p99 at each claim size (a store filled by SQL);
          each beside one raw INSERT per transaction
  middleware [--effects 5000] [--rounds 5]
          per-effect cost of the default middleware chain beside a bare effect (memory store)
  cancel  [--runs 50]
          latency from runtime.cancel to the effect's abort, in-process and from a second
          process on the same SQLite file, beside one append's p50; then, for a streaming LLM
          call, from the cancel to the fake provider's closed connection: through
          loomwork/ai-sdk (durableModel) beside the native OpenAI effect
  sim     [--seeds 200]
          events per second the simulator explores with faults, beside the same seeds without
  stream-budget [--streams 100]
          streams severed by streamTokenBudget: overshoot in deltas, breach-to-close latency
  codec   [--events 20000] [--rounds 5] [--bytes 300]
          per-event cost of the audit chain (hashUs) and AES-256-GCM (encryptUs) beside neither
  ratelimit [--workers 3] [--calls 156] [--limit 10000] [--window-ms 60000]   (needs LOOM_PG_URL)
          worker processes make LLM calls to a fake provider that answers 429 past its output
          tokens per window, under a fleet limiter of the same: peakTpm (target <= limit + one
          reservation), utilization (target >= 0.9), p99WaitMs, 429s; baseline: no limiter
  ui      [--executions 10000] [--requests 500]
          the dashboard's list API over HTTP on a SQLite store of N executions: p50/p99 of the
          first page and filtered or later pages, GET / beside it, and runtime.list({ limit: 50 })
          without HTTP as the baseline; target list p99 <= 200 ms
  footprint [--rounds 7]
          RSS of a fresh process after importing loomwork and loomwork/sqlite from dist/, beside
          a bare node, and the imports' time; target delta <= 25 MB
  spend   [--stops 10]
          each spending path (parallel, nested, retries, children, negotiation, rotation, LLM
          calls, an owner stopped mid-call at most S times) until its budget refuses: real and
          recorded spend, overshoot past the budget; beside the same paths without reservations;
          target worstOvershootOverReservation <= 1
  seam-flood [--dispatches 50] [--stalled 20] [--idle 300]
          a signed dispatch to a worker server, call to acceptance, while a client without the
          secret floods it from 127.0.0.2 (stalled 1 MiB bodies, idle sockets), beside the same
          dispatches without the flood; target floodMaxMs < 1000
  start   [--starts 200] [--rounds 3] [--store sqlite|postgres|both]   (both when LOOM_PG_URL)
          a one-step flow started and awaited, beside one raw INSERT in its own transaction on
          the same store kind: p50/p99, commits and reads per start; target ratioP50 <= 2.5,
          commitsPerStart <= 2
  storage [--steps 1000] [--flows 200] [--bytes 48] [--store sqlite|postgres|both]
          bytes a log takes per step of an N-step flow and per one-step flow, by table and by
          event field, beside a raw (key, payload) row of the same payload on the same engine;
          SQLite always, PostgreSQL when LOOM_PG_URL is set; target ratio <= 2 (SQLite),
          <= 1.6 (PostgreSQL)
`;

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  const workload = name === undefined ? undefined : WORKLOADS[name];
  if (!workload) {
    process.stderr.write(name === undefined ? USAGE : `unknown benchmark "${name}"\n\n${USAGE}`);
    return 2;
  }
  try {
    await workload(rest);
    return 0;
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`${e.message}\n\n${USAGE}`);
    return 2;
  }
}

process.exitCode = await main(process.argv.slice(2));
