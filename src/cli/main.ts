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
import { processIo, type Io } from "./io.ts";
import { environmentWithSecrets } from "./secrets.ts";

/** Runs the command `argv` (without `node` and the script) and resolves with its exit code. */
export async function main(argv: readonly string[], io: Io = processIo()): Promise<number> {
  try {
    const cmd = parseCommand(argv);
    // Q1: the secrets leave the environment before a module is loaded or a child is started.
    environmentWithSecrets();
    return await dispatch(cmd, io);
  } catch (e) {
    io.err(`loom: ${errorLine(e)}${hintFor(e)}`);
    if (e instanceof UsageError && e.showUsage) io.err(`\n${USAGE}`);
    else if (io.debug && e instanceof Error && e.stack) io.err(e.stack);
    return exitCodeOf(e);
  }
}

/**
 * Each command's module is loaded when it runs: a command then compiles and loads only what it
 * uses (`loom ls` does not load the dashboard, the server or the worker), which is most of a
 * short command's start-up under tsx.
 */
async function dispatch(cmd: Command, io: Io): Promise<number> {
  switch (cmd.name) {
    case "help":
      io.out(USAGE);
      return 0;
    case "init":
      return (await import("./commands/init.ts")).initCommand(cmd, io);
    case "run":
      return (await import("./commands/run.ts")).runCommand(cmd, io);
    case "worker":
      return (await import("./commands/worker.ts")).workerCommand(cmd, io);
    case "serve":
      return (await import("./commands/serve.ts")).serveCommand(cmd, io);
    case "ls":
      return (await import("./commands/ls.ts")).lsCommand(cmd, io);
    case "show":
      return (await import("./commands/show.ts")).showCommand(cmd, io);
    case "resume":
      return (await import("./commands/resume.ts")).resumeCommand(cmd, io);
    case "cancel":
      return (await import("./commands/cancel.ts")).cancelCommand(cmd, io);
    case "schedules":
      return (await import("./commands/schedules.ts")).schedulesCommand(cmd, io);
    case "verify":
      return (await import("./commands/verify.ts")).verifyCommand(cmd, io);
    case "erase-subject":
      return (await import("./commands/erase-subject.ts")).eraseSubjectCommand(cmd, io);
    case "send":
      return (await import("./commands/send.ts")).sendCommand(cmd, io);
    case "fork":
      return (await import("./commands/fork.ts")).forkCommand(cmd, io);
    case "ui":
      return (await import("./commands/ui.ts")).uiCommand(cmd, io);
  }
}

/** A sealed database read without its keys: say where the keys go (docs/cli.md). */
function hintFor(e: unknown): string {
  return isLoomError(e, "LOOM_CODEC_KEY") || isLoomError(e, "LOOM_CODEC")
    ? " (give every loom command the database's codec keys in LOOM_CODEC_KEYS)"
    : "";
}
