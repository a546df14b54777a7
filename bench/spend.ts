/**
 * `npm run bench -- spend [--stops 10]`: how far past its budget each spending path can go
 * (issue 20). Every path spends until its budget refuses, with fakes that count what they really
 * spent (spend-fakes.ts) apart from what Loom records.
 *
 * - One line per path: `budget`, `realSpent` (what the provider would bill), `recordedSpent` (the
 *   log's), `overshoot` = max(0, realSpent - budget), `reservation` (what one call declares).
 * - The summary: `worstOvershootOverReservation`, the most any path's overshoot is of its
 *   reservation. Target: at most 1 (what one call may spend past what admission saw).
 * The baseline beside it, measured in the same run, is the same paths with effects that declare
 * no `reserve`: one `spend-baseline` line per path and the summary's `withoutReservations`. It
 * shows what overshoot the reservations prevent (the stopped-owner path's only by `--stops`).
 */
import { emit, intFlag, note, nowMs, parseFlags, round } from "./lib.ts";
import type { PathDriver } from "./spend-fakes.ts";
import {
  childNegotiatesPath,
  childrenAtOncePath,
  negotiateOwnCeilingPath,
  nestedPath,
  parallelPath,
  retriesPath,
  rotationPath,
} from "./spend-paths.ts";
import { crashPath, llmParallelPath } from "./spend-provider.ts";

interface PathLine {
  path: string;
  budget: number;
  realSpent: number;
  recordedSpent: number;
  overshoot: number;
  reservation: number;
  calls: number;
  refusals: number;
}

async function runAll(
  paths: readonly (readonly [string, PathDriver])[],
  reserving: boolean,
): Promise<PathLine[]> {
  const lines: PathLine[] = [];
  for (const [path, drive] of paths) {
    const t0 = nowMs();
    const m = await drive(reserving);
    note(`spend: ${path} ${reserving ? "" : "(baseline) "}${round(nowMs() - t0)} ms`);
    const line: PathLine = {
      path,
      budget: m.budget,
      realSpent: m.realSpent,
      recordedSpent: m.recordedSpent,
      overshoot: Math.max(0, m.realSpent - m.budget),
      reservation: m.reservation,
      calls: m.calls,
      refusals: m.refusals,
    };
    emit({ name: reserving ? "spend" : "spend-baseline", ...line });
    if (reserving && m.realSpent > m.budget + m.reservation) {
      note(`spend: path ${path} spent ${m.realSpent}, past budget ${m.budget} + one reservation`);
    }
    if (reserving && m.recordedSpent > m.realSpent) {
      note(`spend: path ${path} recorded ${m.recordedSpent}, more than the ${m.realSpent} spent`);
    }
    lines.push(line);
  }
  return lines;
}

/** The most any path's overshoot is of its reservation, and the path. */
function worst(lines: readonly PathLine[]): {
  worstOvershootOverReservation: number;
  worstPath: string;
} {
  let ratio = 0;
  let path = "none";
  for (const l of lines) {
    const r = l.overshoot / l.reservation;
    if (r > ratio) [ratio, path] = [r, l.path];
  }
  return { worstOvershootOverReservation: round(ratio, 3), worstPath: path };
}

export async function spendBench(argv: readonly string[]): Promise<void> {
  const stops = intFlag(parseFlags(argv, ["stops"]), "stops", 10);
  const paths: (readonly [string, PathDriver])[] = [
    ["parallel", parallelPath],
    ["nested-parallel", nestedPath],
    ["retries", retriesPath],
    ["child-negotiates", childNegotiatesPath],
    ["negotiate-own-ceiling", negotiateOwnCeilingPath],
    ["children-at-once", childrenAtOncePath],
    ["rotation", rotationPath],
    ["llm-parallel", llmParallelPath],
    ["crash", crashPath(stops)],
  ];
  note(`spend: ${paths.length} paths with reservations, then without (the baseline)`);
  const measured = await runAll(paths, true);
  const baseline = await runAll(paths, false);
  const found = worst(measured);
  emit({
    name: "spend-summary",
    paths: measured.length,
    ...found,
    withoutReservations: worst(baseline),
    target: "worstOvershootOverReservation <= 1",
    pass: found.worstOvershootOverReservation <= 1,
  });
}
