/**
 * Waiting for an execution this process drives to end, for `loom run` and `loom fork --module`:
 * progress on stderr (progress.ts), a notice for each suspend it parks on, a chain followed to
 * the generation that ends it, and SIGINT or SIGTERM answered by leaving the execution as it is.
 * Only the outcome, as JSON, goes to stdout.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { isTerminalStatus } from "../kernel/events.ts";
import { assertNever } from "../kernel/never.ts";
import type { Outcome } from "../runtime/outcome.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { errorText, formatOutcome, shellQuote } from "./format.ts";
import type { Io } from "./io.ts";
import { databaseFlags, type Database } from "./open-runtime.ts";
import { watchProgress } from "./progress.ts";
import type { SignalWatch } from "./signals.ts";

const PARK_POLL_MS = 250;

export interface AwaitOptions {
  where: Database;
  /** No progress lines. */
  quiet: boolean;
  /** The first sequence number whose event the progress reports (earlier ones are history). */
  fromSeq: number;
  /** Who carries the execution on when this command is interrupted, for the message. */
  carryOn: string;
}

/**
 * Waits for `id` (whose outcome `result` settles with) to end, prints the outcome, and resolves
 * with the command's exit code: 0 completed, 1 failed or cancelled, 130 interrupted.
 */
export async function awaitOutcome(
  runtime: Runtime,
  id: string,
  result: Promise<Outcome>,
  options: AwaitOptions,
  io: Io,
  signals: SignalWatch,
): Promise<number> {
  const stopWatching = new AbortController();
  const progress = options.quiet ? undefined : watchProgress(runtime, id, options.fromSeq, io);
  try {
    void announceParking(runtime, id, options.where, io, stopWatching.signal);
    const until = (p: Promise<Outcome>) =>
      Promise.race([p, signals.received.then((signal) => ({ interrupted: signal }))]);
    let ended = await until(result);
    // A chain (ADR 0109): follow each continuation to the generation that ends it.
    while (!("interrupted" in ended) && ended.status === "continued" && ended.continuedTo) {
      io.err(`loom: execution "${id}" continued as "${ended.continuedTo}"`);
      ended = await until(runtime.waitForCompletion(ended.continuedTo));
    }
    await progress?.stop();
    if ("interrupted" in ended) {
      const status = await runtime.getState(id).then(
        (s) => s.status,
        () => "unknown",
      );
      io.err(
        `loom: ${ended.interrupted} received; execution "${id}" is left ${status} (${options.carryOn} carries it on)`,
      );
      return 130;
    }
    io.out(formatOutcome(id, ended));
    return settle(id, ended, io);
  } finally {
    stopWatching.abort();
    await progress?.stop();
  }
}

/** The exit code for each way an execution ends (kernel/events.ts E5). */
function settle(id: string, outcome: Outcome, io: Io): number {
  switch (outcome.status) {
    case "completed":
      return 0;
    case "failed": {
      const why = outcome.error ? errorText(outcome.error) : "no error recorded";
      io.err(`loom: execution "${id}" failed: ${why}`);
      return 1;
    }
    case "cancelled":
      io.err(`loom: execution "${id}" was cancelled`);
      return 1;
    case "continued":
      // Followed to the generation that ended the chain above; one that names no successor is
      // what its log says, and ended as far as this command can tell.
      return 0;
    default:
      return assertNever(outcome.status, "status");
  }
}

/** Tells the user, once for each suspend the execution parks on, how to resume it from elsewhere. */
async function announceParking(
  runtime: Runtime,
  id: string,
  where: Database,
  io: Io,
  signal: AbortSignal,
): Promise<void> {
  const dbFlag = databaseFlags(where);
  const announced = new Set<string>();
  try {
    for (;;) {
      await sleep(PARK_POLL_MS, undefined, { signal });
      const { status, _openSuspends } = await runtime.getState(id);
      const waiting = status === "parked" ? _openSuspends[0] : undefined;
      if (waiting !== undefined && !announced.has(waiting)) {
        announced.add(waiting);
        io.err(
          `loom: execution "${id}" is parked on a suspend; still waiting. ` +
            `Resume it from another terminal: loom resume ${shellQuote(id)} '<JSON>'${dbFlag}`,
        );
      }
      if (isTerminalStatus(status)) return;
    }
  } catch {
    // Aborted (the command is ending) or the runtime closed: nothing left to announce.
  }
}
