/**
 * `loom send <id> <JSON> [--topic T] [--key K]`: posts a message to the inbox of the chain the
 * execution belongs to (runtime.send, inbox.ts N1..N4), where the flow takes it with
 * `ctx.receive`. Any generation's id reaches the chain. Prints
 * `sent to <chain> (topic <T>, message <seq>)`.
 *
 * The message is durable once this command returns. Like `loom resume`, this process registers no
 * flow: when the execution waits in a receive, the message is handed to it here (under its
 * lease), and the process that drives it (the `loom run` that started it, or a `loom worker`)
 * carries the flow on; otherwise the flow finds it at its next receive.
 */
import type { Command } from "../args.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";
import { DEFAULT_TOPIC } from "../../runtime/inbox.ts";

type SendCommand = Extract<Command, { name: "send" }>;

export async function sendCommand(cmd: SendCommand, io: Io): Promise<number> {
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    const options = {
      ...(cmd.topic === undefined ? {} : { topic: cmd.topic }),
      ...(cmd.key === undefined ? {} : { key: cmd.key }),
    };
    const { chainId, seq } = await runtime.send(cmd.id, cmd.message, options);
    io.out(`sent to ${chainId} (topic ${cmd.topic ?? DEFAULT_TOPIC}, message ${seq})`);
    return 0;
  } finally {
    await runtime.close();
  }
}
