/**
 * `loom run <module> <flow> [--input JSON] [--id ID] [--subject ID] [--quiet]`: starts a flow and
 * waits for its outcome, printed as JSON on stdout; meanwhile each step is reported on stderr as
 * it ends (progress.ts), unless `--quiet`. `--subject` names the data subject whose data the
 * execution holds (its payloads are sealed with the subject's key, which `loom erase-subject`
 * destroys).
 *
 * The runtime runs its background loop, so when the execution parks on a suspend and another
 * process appends the resume, this process picks the execution up again (within a poll
 * interval) and carries it to the end. While it waits it also helps recover abandoned
 * executions of the module's flows, like a worker.
 */
import type { Command } from "../args.ts";
import { awaitOutcome } from "../await-outcome.ts";
import { shellQuote } from "../format.ts";
import type { Io } from "../io.ts";
import { UnknownFlowError } from "../../kernel/errors.ts";
import { loadFlows } from "../load-module.ts";
import { openOwnRuntime } from "../open-runtime.ts";
import { watchSignals } from "../signals.ts";

type RunCommand = Extract<Command, { name: "run" }>;

export async function runCommand(cmd: RunCommand, io: Io): Promise<number> {
  const { flows } = await loadFlows(cmd.module, io.cwd);
  if (!flows.some((f) => f.name === cmd.flow)) {
    // Refused before the database is opened, so a typo creates no loom.db.
    const known = flows.map((f) => `"${f.name}"`).join(", ");
    throw new UnknownFlowError(
      `no flow named ${JSON.stringify(cmd.flow)} in ${cmd.module} (it has ${known})`,
    );
  }
  const signals = watchSignals();
  let own: string | undefined = cmd.id;
  const runtime = await openOwnRuntime(cmd, io, () => own, false);
  try {
    for (const flow of flows) runtime.registerFlow(flow);
    // Progress reports what this command adds: a run attached to an existing id skips its past.
    const fromSeq =
      cmd.id === undefined ? 0 : (await runtime.store.head(cmd.id).catch(() => -1)) + 1;
    const options = {
      ...(cmd.id === undefined ? {} : { id: cmd.id }),
      ...(cmd.subject === undefined ? {} : { subject: cmd.subject }),
    };
    const handle = await runtime.start(cmd.flow, cmd.input, options);
    own = handle.id;
    const carryOn = `loom worker, or this command again with --id ${shellQuote(handle.id)} and the same input,`;
    return await awaitOutcome(
      runtime,
      handle.id,
      handle.result(),
      { where: cmd, quiet: cmd.quiet, fromSeq, carryOn },
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
