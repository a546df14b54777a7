/**
 * `loom ui [--port N] [--host H] [--token-file PATH] [--read-only]`: serves the web UI
 * (src/ui/server.ts) on the database until SIGINT or SIGTERM. The URL it listens on is printed on
 * stdout as `loom ui: <url>`.
 *
 * Every request needs the access token (src/ui/auth.ts A1). It comes from `--token-file`, else
 * from the file LOOM_UI_TOKEN_FILE names, else it is new and random, and then it is printed once,
 * in the sign-in URL on the second line of stdout (`loom ui: sign in at <url>/auth?token=...`);
 * a token read from a file is never printed. `--read-only` serves no writes (server.ts S5).
 *
 * Its runtime runs no background loop, like `loom show`: the UI reads the executions and appends
 * what a user asks for (a cancel, a resume, a message, a fork, a rerun), and the processes that
 * drive the executions (`loom run`, `loom worker`) carry them on. `--module M` loads the user's
 * module as `loom run` does (load-module.ts) and registers its flows: the page can then rerun
 * them (recorded for a worker to drive) and a fork of one is driven by this process.
 */
import { resolve } from "node:path";
import type { Command } from "../args.ts";
import { CliError, errorLine } from "../cli-error.ts";
import type { Io } from "../io.ts";
import { loadFlows } from "../load-module.ts";
import { describeDatabase, openRuntime } from "../open-runtime.ts";
import { watchSignals } from "../signals.ts";
import { readTokenFile } from "../../ui/auth.ts";
import { startUiServer } from "../../ui/server.ts";

type UiCommand = Extract<Command, { name: "ui" }>;

export async function uiCommand(
  cmd: UiCommand,
  io: Io,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  // Read before the database is opened: a bad file is refused with nothing started.
  const tokenFile = cmd.tokenFile ?? env.LOOM_UI_TOKEN_FILE;
  const token =
    tokenFile === undefined || tokenFile === ""
      ? undefined
      : await readTokenFile(resolve(io.cwd, tokenFile));
  const flows = cmd.module === undefined ? [] : (await loadFlows(cmd.module, io.cwd)).flows;
  const signals = watchSignals();
  try {
    const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
    try {
      for (const flow of flows) runtime.registerFlow(flow);
      const options = {
        runtime,
        port: cmd.port,
        host: cmd.host,
        allowHosts: cmd.allowHosts,
        readOnly: cmd.readOnly,
        ...(token === undefined ? {} : { token }),
      };
      const server = await startUiServer(options).catch((e: unknown) => {
        throw new CliError(`cannot listen on ${cmd.host}:${cmd.port}: ${errorLine(e)}`);
      });
      try {
        io.out(`loom ui: ${server.url}`);
        if (token === undefined) io.out(`loom ui: sign in at ${server.signInUrl}`);
        else io.err(`loom: sign in at ${server.url}/auth?token=<the token in ${tokenFile}>`);
        const mode = cmd.readOnly ? "read-only UI" : "UI";
        const names = flows.map((f) => f.name).join(", ");
        const withFlows = flows.length === 0 ? "" : ` with flows ${names} from ${cmd.module ?? ""}`;
        io.err(
          `loom: serving the ${mode} of ${describeDatabase(cmd)}${withFlows}; stop with Ctrl-C (SIGINT) or SIGTERM`,
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
