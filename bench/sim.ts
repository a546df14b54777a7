/**
 * `npm run bench -- sim [--seeds 200]`: how fast the simulator explores, in events appended per
 * second of wall time over N seeds with the default faults, beside the same seeds run without
 * faults (no crash, no transient failure, no delay) in the same run.
 */
import { runSeed } from "../sim/simulator.ts";
import { emit, intFlag, note, parseFlags, round } from "./lib.ts";

async function explore(seeds: number, faults: boolean) {
  const none = { crash: 0, transient: 0, delay: 0 };
  let events = 0;
  let crashes = 0;
  const t0 = performance.now();
  for (let seed = 1; seed <= seeds; seed++) {
    const r = await runSeed(seed, faults ? {} : { faults: none });
    if (r.violations.length > 0) throw new Error(`seed ${seed} failed: ${r.violations.join("; ")}`);
    events += r.events;
    crashes += r.crashes;
  }
  const seconds = (performance.now() - t0) / 1000;
  return { events, crashes, seconds, eventsPerSec: events / seconds };
}

export async function simBench(argv: readonly string[]): Promise<void> {
  const seeds = intFlag(parseFlags(argv, ["seeds"]), "seeds", 200);
  note(`sim: ${seeds} seeds with faults, then without`);
  const faulty = await explore(seeds, true);
  const clean = await explore(seeds, false);
  emit({
    name: "sim",
    seeds,
    events: faulty.events,
    crashes: faulty.crashes,
    eventsPerSec: round(faulty.eventsPerSec, 0),
    seedsPerSec: round(seeds / faulty.seconds, 1),
    baselineEventsPerSec: round(clean.eventsPerSec, 0),
    baseline: "the same seeds without faults",
  });
}
