/**
 * `loom fork <id> <seq> [--id NEW] [--budget JSON] [--keep-deadline] [--module M [--quiet]]`: a
 * new execution whose
 * log is a copy of `<id>`'s events up to and including sequence `<seq>` (runtime.fork, fork.ts
 * V1..V6), which then runs on from there: what the prefix left open (a step it had not finished,
 * everything after it) runs again, and what it recorded is replayed. `--budget` gives the copy a
 * budget of its own, which may only narrow the original's (V6); what the copy spent counts. The
 * copy's deadline and the timeouts of the steps it re-runs count from the fork (V7), unless
 * `--keep-deadline`.
 *
 * Without `--module` the command only records the fork: it prints the new id (the one line on
 * stdout, so `NEW=$(loom fork ...)` works) and leaves the driving to a process that has the
 * flow, a `loom worker`, which recovers it like any execution whose owner is gone. With
 * `--module M` this process has the flow: it drives the fork to its end and prints its outcome
 * like `loom run`, with the same progress on stderr.
 */
import type { Command } from "../args.ts";
import { awaitOutcome } from "../await-outcome.ts";
import { shellQuote } from "../format.ts";
import type { Io } from "../io.ts";
import { loadFlows } from "../load-module.ts";
import { databaseFlags, openOwnRuntime, openRuntime } from "../open-runtime.ts";
import { watchSignals } from "../signals.ts";
import { UnknownFlowError } from "../../kernel/errors.ts";
import { checkedBudget } from "../../runtime/flow.ts";
import type { ForkOptions } from "../../runtime/runtime-options.ts";

type ForkCommand = Extract<Command, { name: "fork" }>;

export function forkCommand(cmd: ForkCommand, io: Io): Promise<number> {
  return cmd.module === undefined ? recordFork(cmd, io) : driveFork(cmd, cmd.module, io);
}

/** `--budget`, checked before the database is opened (the runtime checks it against the origin). */
function forkOptions(cmd: ForkCommand): ForkOptions {
  const options: ForkOptions = cmd.keepDeadline ? { keepDeadline: true } : {};
  if (cmd.budget !== undefined) options.budget = checkedBudget(cmd.budget, "the fork (--budget)");
  return options;
}

async function recordFork(cmd: ForkCommand, io: Io): Promise<number> {
  const options = forkOptions(cmd);
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    const { id } = await runtime.fork(cmd.id, cmd.atSequence, cmd.newId, options);
    const { status, flow } = await runtime.getState(id);
    io.out(id);
    const answer =
      status === "parked"
        ? `answer its suspend (loom resume ${shellQuote(id)} '<JSON>'${databaseFlags(cmd)}), and `
        : "";
    io.err(
      `loom: forked ${cmd.id} at ${cmd.atSequence} as ${id} (${status}); ` +
        `${answer}a loom worker with flow ${JSON.stringify(flow)} drives it on`,
    );
    return 0;
  } finally {
    await runtime.close();
  }
}

async function driveFork(cmd: ForkCommand, module: string, io: Io): Promise<number> {
  const options = forkOptions(cmd);
  const { flows } = await loadFlows(module, io.cwd);
  const signals = watchSignals();
  let own: string | undefined;
  const runtime = await openOwnRuntime(cmd, io, () => own, true);
  try {
    for (const flow of flows) runtime.registerFlow(flow);
    // Refused before anything is written: a fork this process cannot drive would wait forever.
    const { flow } = await runtime.getState(cmd.id);
    if (!flows.some((f) => f.name === flow)) {
      const known = flows.map((f) => `"${f.name}"`).join(", ");
      throw new UnknownFlowError(
        `execution "${cmd.id}" runs flow ${JSON.stringify(flow)}, which ${module} does not have (it has ${known})`,
      );
    }
    const handle = await runtime.fork(cmd.id, cmd.atSequence, cmd.newId, options);
    own = handle.id;
    io.err(`loom: forked ${cmd.id} at ${cmd.atSequence} as ${handle.id}`);
    return await awaitOutcome(
      runtime,
      handle.id,
      handle.result(),
      { where: cmd, quiet: cmd.quiet, fromSeq: cmd.atSequence + 1, carryOn: "loom worker" },
      io,
      signals,
    );
  } finally {
    try {
      await runtime.close();
    } finally {
      signals.dispose();
    }
  }
}
