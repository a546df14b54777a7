/**
 * `npm run sim -- --seeds N [--from S] [--steps K] [--fleet | --single] [--flow | --no-flow]
 * [--mutate M] [--stop] [--dump]`: runs N seeds of the simulator from S and prints one summary
 * line (JSON: events, crashes, the generations chains continued into, the messages sent, the forks
 * made, the children spawned, the generations they continued into, the children cascades
 * cancelled, the seeds that ran on a fleet's store and the executions its members claimed, the
 * seeds with flow control, the executions that waited in a queue and were admitted, the leases
 * admissions took, the limited calls, the waits on limiters, the calls never settled and the
 * crashes in flow control: flow-control.ts FlowCounts); a failing seed prints
 * its violations and the command that reproduces it (`--dump`: and every log), and the exit status
 * is 1. Each seed draws whether it runs on a fleet's store; `--fleet` runs every seed on one,
 * `--single` none; and whether its runtimes have queues and limiters (`--flow`, `--no-flow`).
 * `--mutate` runs a deliberately broken store (the simulator's own test: drop-after-ack,
 * ignore-key-concurrency, ignore-window);
 * `--stop` ends at the first failure.
 */
import type { FaultRates } from "./faulty-store.ts";
import { runSeed } from "./simulator.ts";

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isSafeInteger(v) || v < 0) {
    process.stderr.write(`--${name} needs a whole number\n`);
    process.exit(2);
  }
  return v;
}

const seeds = flag("seeds", 100);
const from = flag("from", 1);
const steps = flag("steps", 60);
const MUTATIONS: Record<string, Partial<FaultRates>> = {
  "drop-after-ack": { dropAfterAck: 0.02 },
  "ignore-key-concurrency": { ignoreKeyConcurrency: 1 },
  "ignore-window": { ignoreWindow: 1 },
};
const mutateAt = process.argv.indexOf("--mutate");
const mutation = mutateAt < 0 ? undefined : process.argv[mutateAt + 1];
if (mutation !== undefined && !(mutation in MUTATIONS)) {
  const known = Object.keys(MUTATIONS).join(", ");
  process.stderr.write(`unknown mutation ${JSON.stringify(mutation)} (known: ${known})\n`);
  process.exit(2);
}
const stop = process.argv.includes("--stop");
const faults = mutation === undefined ? {} : (MUTATIONS[mutation] ?? {});
const forced = process.argv.includes("--fleet")
  ? true
  : process.argv.includes("--single")
    ? false
    : undefined;
const flow = process.argv.includes("--flow")
  ? true
  : process.argv.includes("--no-flow")
    ? false
    : undefined;
const extra =
  (forced === undefined ? "" : forced ? " --fleet" : " --single") +
  (flow === undefined ? "" : flow ? " --flow" : " --no-flow") +
  (mutation === undefined ? "" : ` --mutate ${mutation}`);
const t0 = performance.now();
let events = 0;
let crashes = 0;
let rotations = 0;
let messages = 0;
let forks = 0;
let children = 0;
let childRotations = 0;
let cascades = 0;
let fleets = 0;
let claims = 0;
const flowTotals = {
  flowSeeds: 0,
  queued: 0,
  admitted: 0,
  admissionLeases: 0,
  limitedCalls: 0,
  limiterWaits: 0,
  unsettledCalls: 0,
  flowCrashes: 0,
};
const failed: number[] = [];
let ran = 0;
for (let seed = from; seed < from + seeds; seed++) {
  ran++;
  const r = await runSeed(seed, {
    steps,
    faults,
    ...(forced === undefined ? {} : { fleet: forced }),
    ...(flow === undefined ? {} : { flowControl: flow }),
  });
  if (r.flowControl) flowTotals.flowSeeds++;
  for (const k of Object.keys(flowTotals) as (keyof typeof flowTotals)[]) {
    if (k !== "flowSeeds") flowTotals[k] += r[k];
  }
  events += r.events;
  crashes += r.crashes;
  rotations += r.rotations;
  messages += r.messages;
  forks += r.forks;
  children += r.children;
  childRotations += r.childRotations;
  cascades += r.cascades;
  if (r.fleet) fleets++;
  claims += r.claims;
  if (r.violations.length > 0) {
    failed.push(seed);
    process.stderr.write(`seed ${seed} failed:\n  ${r.violations.join("\n  ")}\n`);
    process.stderr.write(
      `reproduce: npm run sim -- --seeds 1 --from ${seed} --steps ${steps}${extra}\n`,
    );
    if (process.argv.includes("--dump")) {
      for (const [id, log] of Object.entries(r.logs ?? {})) {
        process.stderr.write(`--- ${id}\n`);
        for (const e of log) {
          process.stderr.write(
            `${e.seq} @${e.at - log[0]!.at} ${e.kind} ${JSON.stringify(e.payload).slice(0, 160)}\n`,
          );
        }
      }
    }
    if (stop) break;
  }
  if ((seed - from + 1) % 500 === 0) process.stderr.write(`sim: ${seed - from + 1} seeds\n`);
}
const seconds = (performance.now() - t0) / 1000;
process.stdout.write(
  `${JSON.stringify({ name: "sim", seeds: ran, from, passed: ran - failed.length, failed, events, crashes, rotations, messages, forks, children, childRotations, cascades, fleets, claims, ...flowTotals, seconds: Math.round(seconds * 10) / 10 })}\n`,
);
process.exitCode = failed.length > 0 ? 1 : 0;
