/**
 * The `loom` command: parses the command line, runs one command, and turns what went wrong into
 * one line on stderr and an exit code.
 *
 * Exit codes: 0 success; 1 an error, or a flow that ended failed or cancelled; 2 a usage error
 * (unknown command or flag, missing argument, JSON that does not parse); 130 interrupted.
 */
import { parseCommand, USAGE, type Command } from "./args.ts";
import { UsageError, errorLine, exitCodeOf } from "./cli-error.ts";
import { isLoomError } from "../kernel/errors.ts";
import { cancelCommand } from "./commands/cancel.ts";
import { eraseSubjectCommand } from "./commands/erase-subject.ts";
import { forkCommand } from "./commands/fork.ts";
import { lsCommand } from "./commands/ls.ts";
import { resumeCommand } from "./commands/resume.ts";
import { runCommand } from "./commands/run.ts";
import { schedulesCommand } from "./commands/schedules.ts";
import { sendCommand } from "./commands/send.ts";
import { serveCommand } from "./commands/serve.ts";
import { showCommand } from "./commands/show.ts";
import { uiCommand } from "./commands/ui.ts";
import { verifyCommand } from "./commands/verify.ts";
import { workerCommand } from "./commands/worker.ts";
import { processIo, type Io } from "./io.ts";

/** Runs the command `argv` (without `node` and the script) and resolves with its exit code. */
export async function main(argv: readonly string[], io: Io = processIo()): Promise<number> {
  try {
    return await dispatch(parseCommand(argv), io);
  } catch (e) {
    io.err(`loom: ${errorLine(e)}${hintFor(e)}`);
    if (e instanceof UsageError && e.showUsage) io.err(`\n${USAGE}`);
    else if (io.debug && e instanceof Error && e.stack) io.err(e.stack);
    return exitCodeOf(e);
  }
}

function dispatch(cmd: Command, io: Io): Promise<number> {
  switch (cmd.name) {
    case "help":
      io.out(USAGE);
      return Promise.resolve(0);
    case "run":
      return runCommand(cmd, io);
    case "worker":
      return workerCommand(cmd, io);
    case "serve":
      return serveCommand(cmd, io);
    case "ls":
      return lsCommand(cmd, io);
    case "show":
      return showCommand(cmd, io);
    case "resume":
      return resumeCommand(cmd, io);
    case "cancel":
      return cancelCommand(cmd, io);
    case "schedules":
      return schedulesCommand(cmd, io);
    case "verify":
      return verifyCommand(cmd, io);
    case "erase-subject":
      return eraseSubjectCommand(cmd, io);
    case "send":
      return sendCommand(cmd, io);
    case "fork":
      return forkCommand(cmd, io);
    case "ui":
      return uiCommand(cmd, io);
  }
}

/** A sealed database read without its keys: say where the keys go (docs/cli.md). */
function hintFor(e: unknown): string {
  return isLoomError(e, "LOOM_CODEC_KEY") || isLoomError(e, "LOOM_CODEC")
    ? " (give every loom command the database's codec keys in LOOM_CODEC_KEYS)"
    : "";
}
