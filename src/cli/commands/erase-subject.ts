/**
 * `loom erase-subject <subject> --yes [--json]`: makes a data subject's payloads unrecoverable
 * (runtime.eraseSubject, erase-subject.ts X1..X4): cancels the live executions that hold its
 * data, records SUBJECT_ERASED in each of their logs, then destroys the subject's key. Logs keep
 * their shape, still fold (the payloads read `{ "$erased": <subject> }`) and still verify.
 * Irreversible, so `--yes` is required (args.ts refuses without it, before anything is opened).
 */
import type { Command } from "../args.ts";
import { formatErasure } from "../format.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";

type EraseSubjectCommand = Extract<Command, { name: "erase-subject" }>;

export async function eraseSubjectCommand(cmd: EraseSubjectCommand, io: Io): Promise<number> {
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    const erasure = await runtime.eraseSubject(cmd.subject);
    io.out(cmd.json ? JSON.stringify(erasure, null, 2) : formatErasure(erasure));
    return 0;
  } finally {
    await runtime.close();
  }
}
