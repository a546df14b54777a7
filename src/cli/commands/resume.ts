/**
 * `loom resume <id> [JSON]`: appends the resume that answers an execution's suspend.
 *
 * This process registers no flows, so it only records the fact; the process that drives the
 * execution (the `loom run` that started it, or a `loom worker`) carries the flow on.
 */
import type { Command } from "../args.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";

type ResumeCommand = Extract<Command, { name: "resume" }>;

export async function resumeCommand(cmd: ResumeCommand, io: Io): Promise<number> {
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    await runtime.resume(cmd.id, cmd.payload);
    io.out(`resumed ${cmd.id}`);
    return 0;
  } finally {
    await runtime.close();
  }
}
