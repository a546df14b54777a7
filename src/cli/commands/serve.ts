/**
 * `loom serve <module> --port N (--secret-env NAME | --secret-file PATH)`: a worker (see
 * worker.ts) that also serves the HTTP worker seam (src/remote/worker-server.ts), so an
 * orchestrator on the same database can dispatch executions to it and forward cancels (ADR 0020
 * K8.5).
 *
 * The secret is read from the environment variable NAME or the file PATH, never from the command
 * line, where `ps` would show it. The variable is deleted from this process's environment before
 * the module is loaded (secrets.ts Q1), so neither its flows nor a child process they spawn find
 * it there; only the file form keeps it out of `/proc/<pid>/environ`. With `--tls-cert` and
 * `--tls-key` it serves HTTPS. The URL it listens on is the one line on stdout; progress goes to
 * stderr. On SIGINT or SIGTERM it stops listening, then closes the runtime, which releases the
 * leases of what it drives so another process can take them over at once.
 */
import { MIN_SECRET_LENGTH } from "../../remote/signing.ts";
import {
  createWorkerServer,
  type WorkerServer,
  type WorkerServerOptions,
} from "../../remote/worker-server.ts";
import type { Command } from "../args.ts";
import { CliError, errorLine } from "../cli-error.ts";
import type { Io } from "../io.ts";
import { loadFlows } from "../load-module.ts";
import { describeDatabase } from "../open-runtime.ts";
import { readSecretFile, takeVariable } from "../secrets.ts";
import { openWorkerRuntime, recoverNow } from "./worker.ts";
import { watchSignals } from "../signals.ts";

type ServeCommand = Extract<Command, { name: "serve" }>;

export async function serveCommand(
  cmd: ServeCommand,
  io: Io,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const secret = secretOf(cmd, env);
  const tls = cmd.tls && {
    cert: readSecretFile(cmd.tls.certFile, "--tls-cert"),
    key: readSecretFile(cmd.tls.keyFile, "--tls-key"),
  };
  const { path, flows } = await loadFlows(cmd.module, io.cwd);
  const signals = watchSignals();
  const runtime = await openWorkerRuntime(cmd, flows, io);
  let server: WorkerServer | undefined;
  try {
    server = createWorkerServer({ runtime, secret, ...serverLimits(cmd), ...(tls ? { tls } : {}) });
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

/** The server's options that the command's flags set. */
function serverLimits(cmd: ServeCommand): Partial<WorkerServerOptions> {
  const limits: Partial<WorkerServerOptions> = {};
  if (cmd.workerId !== undefined) limits.workerId = cmd.workerId;
  if (cmd.maxConnections !== undefined) limits.maxConnections = cmd.maxConnections;
  if (cmd.maxUnverifiedBytes !== undefined) limits.maxUnverifiedBytes = cmd.maxUnverifiedBytes;
  if (cmd.requestTimeoutMs !== undefined) limits.requestTimeoutMs = cmd.requestTimeoutMs;
  return limits;
}

/** The worker secret, from `--secret-file` or from `--secret-env` (deleted once read: Q1). */
function secretOf(cmd: ServeCommand, env: NodeJS.ProcessEnv): string {
  const where =
    cmd.secretFile !== undefined
      ? `the file ${cmd.secretFile} (--secret-file)`
      : `${cmd.secretEnv} (--secret-env)`;
  let secret: string | undefined;
  if (cmd.secretFile !== undefined) secret = readSecretFile(cmd.secretFile, "--secret-file");
  else if (cmd.secretEnv !== undefined) secret = takeVariable(env, cmd.secretEnv);
  if (secret === undefined || secret === "") {
    throw new CliError(
      cmd.secretFile !== undefined
        ? `${where} is empty`
        : `the environment variable ${where} is not set`,
    );
  }
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new CliError(
      `the secret in ${where} is ${secret.length} characters; it needs at least ${MIN_SECRET_LENGTH}`,
    );
  }
  return secret;
}
