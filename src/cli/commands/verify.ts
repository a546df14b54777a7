/**
 * `loom verify <id> [--json]`: checks an execution's audit chain as stored (trust/verify.ts
 * K1..K5): every event's hash, every link, no missing sequence number, and a successor's link to
 * its predecessor. Prints `ok <id>: N events, head <hash>` and exits 0, or
 * `TAMPERED <id>: first bad sequence S (problem)` and exits 1; `--json` prints the report, with
 * the same exit code. A keyed audit (`LOOM_AUDIT_KEY`) verifies only with the same key. Where the
 * deployment has no audit (neither `LOOM_AUDIT` nor `LOOM_AUDIT_KEY`), a log whose first event
 * has no hash was written without one: `not audited <id>: N events`, exit 0 (issue 21). With the
 * audit on, the same log is TAMPERED: a log of an audited deployment cannot shed its hashes.
 */
import type { Command } from "../args.ts";
import { formatVerify } from "../format.ts";
import type { Io } from "../io.ts";
import { openRuntime, trustFromEnv } from "../open-runtime.ts";
import { environmentWithSecrets } from "../secrets.ts";
import { ExecutionNotFoundError } from "../../kernel/errors.ts";

type VerifyCommand = Extract<Command, { name: "verify" }>;

export async function verifyCommand(cmd: VerifyCommand, io: Io): Promise<number> {
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    const report = await runtime.verifyLog(cmd.id);
    if (!report.ok && report.events === 0 && (await runtime.store.head(cmd.id)) < 0) {
      throw new ExecutionNotFoundError(`no execution has the id "${cmd.id}"`);
    }
    const auditOn = trustFromEnv(environmentWithSecrets()).audit !== undefined;
    if (!auditOn && report.problem === "unhashed" && report.firstBadSeq === 0) {
      const events = (await runtime.store.head(cmd.id)) + 1;
      io.out(
        cmd.json
          ? JSON.stringify({ ...report, events, audited: false }, null, 2)
          : `not audited ${cmd.id}: ${events} events, written with the audit off (LOOM_AUDIT=1 turns it on)`,
      );
      return 0;
    }
    io.out(cmd.json ? JSON.stringify(report, null, 2) : formatVerify(report));
    if (!cmd.json && report.problem === "unhashed") {
      io.err(
        "loom: events without a hash were written with the audit off: set LOOM_AUDIT=1 " +
          "(or LOOM_AUDIT_KEY) for every command and worker that writes to the database",
      );
    }
    return report.ok ? 0 : 1;
  } finally {
    await runtime.close();
  }
}
