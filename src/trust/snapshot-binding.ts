/**
 * Snapshots bound to the audit chain (issue 22): the stored form, its MAC, and the check both the
 * sealing store (sealed-snapshots.ts) and verifyLog (verify.ts K6) make. Pure apart from reading
 * the log through the function it is given.
 *
 * Invariants (tests cite B1..B5):
 * B1. With an audit, a snapshot is stored as `{ $audit: { chain, mac }, state }`: `state` is what
 *     was stored before (the plain state, or its sealed form: sealing comes first, as for events,
 *     V4), `chain` the audit hash at the snapshot's sequence number (the hash the event there
 *     carries; null when it carries none), and `mac` the audit's digest (HMAC-SHA-256 with a key,
 *     SHA-256 without) of the canonical JSON of `{ snapshot: { executionId, seq, chain } }`, a
 *     newline, and the state's JSON text as stored. The text is what JSON.stringify made, and a
 *     store keeps the text it is given (store/rows.ts), so JSON.stringify of the state it reads
 *     back is that text again: the MAC costs no parse and no sort of a large state on the way in.
 * B2. A snapshot is used only if its binding verifies: the MAC recomputed from the row as stored,
 *     and `chain` equal to the audit hash at its sequence number as the log holds it. One that does
 *     not (no binding, a state, sequence number or execution changed, another log's or a deleted
 *     log's snapshot) is ignored and reported (LOOM_SNAPSHOT_REJECTED): the log folds from its
 *     events. With a key, nobody without it can make a snapshot that verifies; without one,
 *     someone who recomputes the digest can (as for events, A4).
 * B3. verifyLog makes the same check (verify.ts K6) and names a snapshot that fails it.
 * B4. A compacted log's snapshot still verifies: compaction keeps every event after the snapshot
 *     and the last one (compaction.ts P2, store S14), so the hash at its sequence number stays in
 *     the log: on the event there, or as the `prev` of the event after it.
 * B5. With no audit, snapshots are stored and used as before: there is nothing to bind them to. A
 *     bound snapshot read without an audit is unwrapped, unchecked. Nor is there where the log
 *     carries no audit hash at the snapshot's sequence number (events written before the audit
 *     was turned on): an unbound snapshot there is used as it is, and verifyLog finds the log
 *     `unhashed` (K4). Stripping that hash to get a forged snapshot used is an edit of the event,
 *     which verifyLog reports.
 */
import { timingSafeEqual } from "node:crypto";
import type { Envelope } from "../kernel/events.ts";
import { canonicalJson, isPlainObject, type Json } from "../kernel/json.ts";
import { hashOf, prevOf, type AuditHasher } from "./audit.ts";

/** B1: a snapshot's stored form with an audit. */
export interface BoundSnapshot {
  $audit: { chain: string | null; mac: string };
  state: Json;
}

/** Why a snapshot's binding fails (B2): none, a MAC that does not match, or another chain's. */
export type BindingProblem = "unbound" | "changed" | "chain";

export type BindingCheck = { verified: true } | { verified: false; problem: BindingProblem };

/** Reads the log as stored (raw: hashes in the meta). */
export type RawRead = (id: string, from: number, limit: number) => Promise<Envelope[]>;

export function isBound(v: unknown): v is BoundSnapshot {
  if (!isPlainObject(v) || Object.keys(v).length !== 2 || !("state" in v)) return false;
  const a = v.$audit;
  return (
    isPlainObject(a) &&
    typeof a.mac === "string" &&
    (a.chain === null || typeof a.chain === "string")
  );
}

/** B1: the MAC of a snapshot of `id` at `seq`, bound to `chain`, with `stateText` as stored. */
function macOf(
  hasher: AuditHasher,
  id: string,
  seq: number,
  chain: string | null,
  stateText: string,
): string {
  const where = canonicalJson({ snapshot: { executionId: id, seq, chain } });
  return hasher.digestText(where, "\n", stateText);
}

/**
 * B1: the JSON text of the state whose JSON text is `stateText` (as it will be stored), bound to
 * the chain hash `chain` at `seq`.
 */
export function boundText(
  hasher: AuditHasher,
  id: string,
  seq: number,
  chain: string | null,
  stateText: string,
): string {
  const audit = { chain, mac: macOf(hasher, id, seq, chain, stateText) };
  return `{"$audit":${JSON.stringify(audit)},"state":${stateText}}`;
}

/**
 * B4: the audit hash at `seq` as `id`'s log holds it: the hash of the event there, or the `prev` of
 * the event after it; null when that event carries none; undefined when the log holds neither.
 */
export async function chainHashAt(
  read: RawRead,
  id: string,
  seq: number,
): Promise<string | null | undefined> {
  const [e] = await read(id, seq, 1);
  if (!e) return undefined;
  if (e.seq === seq) return hashOf(e) ?? null;
  if (e.seq === seq + 1) return prevOf(e) ?? null;
  return undefined;
}

/** B2: whether the snapshot row of `id` at `seq`, as stored, is bound to the log's chain. */
export async function checkBinding(
  hasher: AuditHasher,
  read: RawRead,
  id: string,
  seq: number,
  stored: unknown,
): Promise<BindingCheck> {
  if (!isBound(stored)) {
    // B5: nothing to bind to where the log has no hash at `seq`.
    const unaudited = (await chainHashAt(read, id, seq)) === null;
    return unaudited ? { verified: true } : { verified: false, problem: "unbound" };
  }
  const { chain, mac } = stored.$audit;
  if (!sameText(macOf(hasher, id, seq, chain, JSON.stringify(stored.state)), mac)) {
    return { verified: false, problem: "changed" };
  }
  if ((await chainHashAt(read, id, seq)) !== chain) return { verified: false, problem: "chain" };
  return { verified: true };
}

/** Compares a MAC in constant time (a stored one is the attacker's to choose). */
function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, "utf8");
  const y = Buffer.from(b, "utf8");
  return x.length === y.length && timingSafeEqual(x, y);
}
