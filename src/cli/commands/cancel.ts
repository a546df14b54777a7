/**
 * `loom cancel <id> [--reason TEXT]`: cancels an execution from this process. The cancel fences
 * the execution's lease, records STEP_CANCELLED and EXECUTION_CANCELLED, and tells the process
 * that drives it (a `loom run` or `loom worker` on the same database) to abort what is in flight.
 * Prints `cancelled <id>`, or `<id> had already ended (<status>)` when there was nothing to do.
 */
import type { Command } from "../args.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";

type CancelCommand = Extract<Command, { name: "cancel" }>;

export async function cancelCommand(cmd: CancelCommand, io: Io): Promise<number> {
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    if (await runtime.cancel(cmd.id, cmd.reason)) {
      io.out(`cancelled ${cmd.id}`);
    } else {
      io.out(`${cmd.id} had already ended (${(await runtime.getState(cmd.id)).status})`);
    }
    return 0;
  } finally {
    await runtime.close();
  }
}
