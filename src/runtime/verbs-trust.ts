/**
 * The public verbs on what a log proves and what it keeps: verify its audit chain
 * (trust/verify.ts K1..K5), erase a data subject (erase-subject.ts X1..X4), compact a log
 * (compaction.ts) and release ended executions by a retention policy (retention.ts T1..). The
 * codec and the audit themselves are wired where the store is made, in RuntimeState's
 * constructor (sealStore). Each takes the runtime's state (runtime-state.ts); runtime.ts's
 * Runtime hands it in, and keeps the TSDoc users read.
 *
 * Invariants (runtime.ts states them): ADR 0111 (verify and compact authorize first); what
 * retention releases is forgotten by the runtime's memories too (heads, outcomes), so neither
 * answers for an id that has no log any more.
 */
import { InvalidInputError, InvariantViolation, UnauthorizedError } from "../kernel/errors.ts";
import { assertValidId } from "../kernel/ids.ts";
import { sealerOf } from "../trust/sealed-store.ts";
import { verifyLog as verifyRaw, type RawLog, type VerifyReport } from "../trust/verify.ts";
import { AuditHasher } from "../trust/audit.ts";
import { compactLog, type Compaction, type CompactOptions } from "./compaction.ts";
import { releaseByPolicy, type RetentionPolicy } from "./retention.ts";
import { eraseSubject as eraseSealed, type Erasure } from "./erase-subject.ts";
import { checkedPrincipal, checkedSubject } from "./runtime-support.ts";
import type { CallerOptions } from "./runtime-options.ts";
import { authorize } from "./runtime-core.ts";
import { cancelOne } from "./runtime-routing.ts";
import type { RuntimeState } from "./runtime-state.ts";

/** Checks the audit chain of `id` as stored (runtime.ts `verifyLog`). */
export async function verifyLog(
  s: RuntimeState,
  id: string,
  options: CallerOptions = {},
): Promise<VerifyReport> {
  assertValidId(id);
  await authorize(s, id, options);
  const sealer = sealerOf(s.store);
  if (!sealer) throw new InvariantViolation("the runtime's store is not a sealing store");
  const raw: RawLog = {
    readRaw: (i, from, limit) => sealer.readRaw(i, from, limit),
    head: (i) => s.store.head(i),
    snapshot: (i) => sealer.inner.loadSnapshot(i),
    readStart: async (i) => (await s.store.read(i, 0, 1))[0],
  };
  return verifyRaw(raw, sealer.auditHasher ?? new AuditHasher(true), id);
}

/**
 * Makes every payload of `subject` unrecoverable (runtime.ts `eraseSubject`). Acting `as` a
 * principal, it erases only when every execution holding the subject's data is that principal's
 * or open (ADR 0111): otherwise UnauthorizedError naming none of them, before anything of any of
 * them is cancelled, recorded or destroyed. Without `as`, every one (the data controller's).
 */
export async function eraseSubject(
  s: RuntimeState,
  subject: string,
  options: CallerOptions = {},
): Promise<Erasure> {
  s.assertOpen();
  const checked = checkedSubject(subject) as string;
  if (options === null || typeof options !== "object") {
    throw new InvalidInputError("caller options must be an object");
  }
  const as = checkedPrincipal(options.as);
  const refuse = () => {
    throw new UnauthorizedError(
      `principal ${JSON.stringify(as)} may not erase subject ${JSON.stringify(checked)}: executions of another principal hold its data; nothing was erased`,
      { subject: checked },
    );
  };
  const authorizeOne = (id: string) =>
    authorize(s, id, { as }).catch((e: unknown) => {
      if (e instanceof UnauthorizedError) refuse();
      throw e;
    });
  return eraseSealed(
    {
      store: s.store,
      journal: s.journal,
      clock: s.clock,
      leases: s.leases,
      ownerId: s.ownerId,
      cancelOne: (id, why) => cancelOne(s, id, why),
      ...(as === undefined ? {} : { authorize: authorizeOne }),
    },
    checked,
  );
}

/** Deletes the events of `id` its latest snapshot covers (runtime.ts `compact`). */
export async function compact(
  s: RuntimeState,
  id: string,
  options: CompactOptions = {},
): Promise<Compaction> {
  s.assertOpen();
  assertValidId(id);
  await authorize(s, id, options);
  return compactLog(s.store, id, options);
}

/** Deletes the ended executions `policy` names (runtime.ts `applyRetention`). */
export async function applyRetention(s: RuntimeState, policy: RetentionPolicy): Promise<string[]> {
  s.assertOpen();
  const deps = { store: s.store, clock: s.clock, maxChainHops: s.maxChainHops };
  const released = await releaseByPolicy(deps, policy);
  for (const id of released) {
    s.knownHeads.delete(id);
    s.outcomes.delete(id);
  }
  return released;
}
