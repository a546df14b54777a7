/**
 * `loom ui [--port N] [--host H]`: serves the web UI (src/ui/server.ts) on the database until
 * SIGINT or SIGTERM. The URL it listens on is printed on stdout as `loom ui: <url>`.
 *
 * Its runtime drives nothing (no background loop, no flows), like `loom show`: the UI reads the
 * executions and appends what a user asks for (a cancel, a resume, a message), and the processes
 * that drive the executions (`loom run`, `loom worker`) carry them on.
 */
import type { Command } from "../args.ts";
import { CliError, errorLine } from "../cli-error.ts";
import type { Io } from "../io.ts";
import { describeDatabase, openRuntime } from "../open-runtime.ts";
import { watchSignals } from "../signals.ts";
import { startUiServer } from "../../ui/server.ts";

type UiCommand = Extract<Command, { name: "ui" }>;

export async function uiCommand(cmd: UiCommand, io: Io): Promise<number> {
  const signals = watchSignals();
  try {
    const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
    try {
      const options = { runtime, port: cmd.port, host: cmd.host, allowHosts: cmd.allowHosts };
      const server = await startUiServer(options).catch((e: unknown) => {
        throw new CliError(`cannot listen on ${cmd.host}:${cmd.port}: ${errorLine(e)}`);
      });
      try {
        io.out(`loom ui: ${server.url}`);
        io.err(
          `loom: serving the UI of ${describeDatabase(cmd)}; stop with Ctrl-C (SIGINT) or SIGTERM`,
        );
        const signal = await signals.received;
        io.err(`loom: ${signal} received; closing the UI`);
      } finally {
        await server.close();
      }
    } finally {
      await runtime.close();
    }
  } finally {
    signals.dispose();
  }
  io.err("loom: UI stopped");
  return 0;
}
