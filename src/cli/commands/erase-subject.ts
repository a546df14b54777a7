/**
 * `loom erase-subject <subject> --yes [--json]`: makes a data subject's payloads unrecoverable
 * (runtime.eraseSubject, erase-subject.ts X1..X4): cancels the live executions that hold its
 * data, records SUBJECT_ERASED in each of their logs, then destroys the subject's key. Logs keep
 * their shape, still fold (the payloads read `{ "$erased": <subject> }`) and still verify.
 * Irreversible, so `--yes` is required (args.ts refuses without it, before anything is opened).
 * When the store cannot confirm the key's bytes gone from its files (a reader held an older
 * snapshot: erase-subject.ts X6), the command says so on stderr too and exits 1, so a script
 * runs it again rather than take the erasure as complete.
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
    if (erasure.keyUnconfirmed === undefined) return 0;
    io.err(
      `loom: the key of subject ${cmd.subject} is deleted, but its bytes could not be confirmed gone from the store's files: ${erasure.keyUnconfirmed}`,
    );
    return 1;
  } finally {
    await runtime.close();
  }
}
