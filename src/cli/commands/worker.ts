/**
 * `loom worker <module>`: drives the module's flows until SIGINT or SIGTERM.
 *
 * It recovers abandoned executions of those flows at once and then on every tick of the
 * runtime's background loop (W6: recovery is the only repair path), fires their due timers and
 * carries on executions resumed from other processes. On a signal it closes the runtime, which
 * stops the bodies it drives and releases their leases, so another process can take them over
 * without waiting for a lease to expire.
 */
import type { Command } from "../args.ts";
import { errorLine } from "../cli-error.ts";
import type { Io } from "../io.ts";
import { loadFlows } from "../load-module.ts";
import { describeDatabase, openRuntime } from "../open-runtime.ts";
import type { Flow } from "../../runtime/flow.ts";
import type { Runtime } from "../../runtime/runtime.ts";
import { watchSignals } from "../signals.ts";

type WorkerCommand = Extract<Command, { name: "worker" }>;

export async function workerCommand(cmd: WorkerCommand, io: Io): Promise<number> {
  const { path, flows } = await loadFlows(cmd.module, io.cwd);
  const signals = watchSignals();
  const runtime = await openWorkerRuntime(cmd, flows, io);
  try {
    const names = flows.map((f) => f.name).join(", ");
    io.err(
      `loom: worker ${runtime.ownerId} drives ${names} (from ${path}, ${describeDatabase(cmd)})`,
    );
    await recoverNow(runtime, io);
    io.err("loom: running; stop with Ctrl-C (SIGINT) or SIGTERM");
    const signal = await signals.received;
    io.err(`loom: ${signal} received; closing the runtime`);
  } finally {
    try {
      await runtime.close();
    } finally {
      signals.dispose();
    }
  }
  io.err("loom: worker stopped");
  return 0;
}

/** A runtime that drives `flows` with its background loop on: what `worker` and `serve` run. */
export async function openWorkerRuntime(
  cmd: Extract<Command, { name: "worker" | "serve" }>,
  flows: readonly Flow[],
  io: Io,
): Promise<Runtime> {
  const runtime = await openRuntime(cmd, io.cwd, {
    background: true,
    mustExist: false,
    onError: (e) => io.err(`loom: ${errorLine(e)}`),
    ...(cmd.maxActive !== undefined ? { maxActive: cmd.maxActive } : {}),
  });
  try {
    for (const flow of flows) runtime.registerFlow(flow);
  } catch (e) {
    await runtime.close();
    throw e;
  }
  return runtime;
}

/** Recovers abandoned executions at once, saying how many. */
export async function recoverNow(runtime: Runtime, io: Io): Promise<void> {
  const recovered = await runtime.recoverAbandoned();
  if (recovered.length > 0) {
    io.err(`loom: recovered ${recovered.length} abandoned execution(s): ${recovered.join(", ")}`);
  }
}
