/**
 * `loom serve <module> --port N --secret-env NAME`: a worker (see worker.ts) that also serves the
 * HTTP worker seam (src/remote/worker-server.ts), so an orchestrator on the same database can
 * dispatch executions to it and forward cancels (ADR 0020 K8.5).
 *
 * The secret is read from the environment variable NAME, never from the command line, where
 * `ps` would show it, and the variable is then deleted from this process's environment (before
 * the module is loaded), so neither its flows nor a child process they spawn find it there. The
 * URL it listens on is the one line on stdout; progress goes to stderr. On SIGINT or SIGTERM it
 * stops listening, then closes the runtime, which releases the leases of what it drives so
 * another process can take them over at once.
 */
import { MIN_SECRET_LENGTH } from "../../remote/signing.ts";
import { createWorkerServer, type WorkerServer } from "../../remote/worker-server.ts";
import type { Command } from "../args.ts";
import { CliError, errorLine } from "../cli-error.ts";
import type { Io } from "../io.ts";
import { loadFlows } from "../load-module.ts";
import { describeDatabase } from "../open-runtime.ts";
import { openWorkerRuntime, recoverNow } from "./worker.ts";
import { watchSignals } from "../signals.ts";

type ServeCommand = Extract<Command, { name: "serve" }>;

export async function serveCommand(
  cmd: ServeCommand,
  io: Io,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const secret = secretFrom(env, cmd.secretEnv);
  delete env[cmd.secretEnv];
  const { path, flows } = await loadFlows(cmd.module, io.cwd);
  const signals = watchSignals();
  const runtime = await openWorkerRuntime(cmd, flows, io);
  let server: WorkerServer | undefined;
  try {
    server = createWorkerServer({ runtime, secret });
    const url = await server.listen(cmd.port, cmd.host).catch((e: unknown) => {
      throw new CliError(`cannot listen on ${cmd.host}:${cmd.port}: ${errorLine(e)}`);
    });
    io.out(url);
    const names = flows.map((f) => f.name).join(", ");
    io.err(
      `loom: worker ${runtime.ownerId} serves ${names} at ${url} (from ${path}, ${describeDatabase(cmd)})`,
    );
    await recoverNow(runtime, io);
    io.err("loom: running; stop with Ctrl-C (SIGINT) or SIGTERM");
    const signal = await signals.received;
    io.err(`loom: ${signal} received; closing the server and the runtime`);
  } finally {
    try {
      await server?.close();
      await runtime.close();
    } finally {
      signals.dispose();
    }
  }
  io.err("loom: server stopped");
  return 0;
}

function secretFrom(env: NodeJS.ProcessEnv, name: string): string {
  const secret = env[name];
  if (secret === undefined || secret === "") {
    throw new CliError(`the environment variable ${name} (--secret-env) is not set`);
  }
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new CliError(
      `the secret in ${name} (--secret-env) is ${secret.length} characters; it needs at least ${MIN_SECRET_LENGTH}`,
    );
  }
  return secret;
}
