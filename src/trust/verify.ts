/**
 * verifyLog: checks an execution's audit chain (audit.ts) as stored, and names the first bad
 * sequence number.
 *
 * Invariants (tests cite K1..K6):
 * K1. Each event's hash is recomputed from the event as stored; a mismatch is "changed" at that
 *     event (a flipped byte, a swapped payload, a swapped sequence number).
 * K2. Each event's `prev` must be the hash of the event before it: otherwise "broken link" at it.
 * K3. Sequence numbers must be dense from 0, except below the compaction point (the saved
 *     snapshot's sequence number, store S14): a gap above it is "missing" at the first absent
 *     number, and a log whose stored head is past its last event is "missing" after it. Sequence
 *     0 is never compacted (compaction.ts P2), so a log without it is "missing" at 0.
 * K4. An event that cannot be read (its stored text no longer parses) is "unreadable" at it; an
 *     event with no hash is "unhashed" (a log, or a part of one, written without the audit).
 * K5. A successor's sequence 0 names a hash its predecessor's log holds (A2); when that log is
 *     gone (retention), the link is reported `released`, and when the named event may have been
 *     compacted away (the predecessor's log has a gap), `compacted`: neither is bad.
 * K6. The saved snapshot, if any, must be bound to the chain (snapshot-binding.ts B2): otherwise
 *     "snapshot" at its sequence number, and it does not excuse a gap (K3). An event problem
 *     before it comes first, except a gap at or below it, which the bad snapshot explains.
 */
import type { Envelope } from "../kernel/events.ts";
import { isPlainObject } from "../kernel/json.ts";
import { AuditHasher, hashOf, prevOf } from "./audit.ts";
import { checkBinding, type BindingProblem } from "./snapshot-binding.ts";

export type VerifyProblem =
  "changed" | "broken link" | "missing" | "unreadable" | "unhashed" | "snapshot";

export interface VerifyReport {
  executionId: string;
  ok: boolean;
  /** Events checked. */
  events: number;
  /** The last event's hash. */
  headHash?: string;
  /** The first sequence number that fails, and why (K1..K4, K6). */
  firstBadSeq?: number;
  problem?: VerifyProblem;
  /** The log has compacted gaps (K3) up to this sequence number. */
  compactedThrough?: number;
  /** The saved snapshot and whether it is bound to the chain (K6). */
  snapshot?: { seq: number; verified: boolean; problem?: BindingProblem };
  /** A successor's link to its predecessor's log (K5). */
  predecessor?: {
    executionId: string;
    link: "verified" | "released" | "compacted" | "broken";
  };
}

/** What verifyLog reads: the log as stored (sealed payloads, meta.prev and meta.hash). */
export interface RawLog {
  readRaw(id: string, from?: number, limit?: number): Promise<Envelope[]>;
  head(id: string): Promise<number>;
  /** The saved snapshot as stored (its binding in it, B1), or undefined. */
  snapshot(id: string): Promise<{ seq: number; state: unknown } | undefined>;
  /** Sequence 0 as the runtime reads it (opened), for the predecessor's id. */
  readStart(id: string): Promise<Envelope | undefined>;
}

const PAGE = 500;

export async function verifyLog(
  log: RawLog,
  hasher: AuditHasher,
  executionId: string,
): Promise<VerifyReport> {
  const report: VerifyReport = { executionId, ok: true, events: 0 };
  const stored = await log.snapshot(executionId);
  let snapshotOk = true;
  if (stored) {
    const read = (id: string, from: number, limit: number) => log.readRaw(id, from, limit);
    const check = await checkBinding(hasher, read, executionId, stored.seq, stored.state);
    snapshotOk = check.verified;
    report.snapshot = check.verified
      ? { seq: stored.seq, verified: true }
      : { seq: stored.seq, verified: false, problem: check.problem };
  }
  // K3 and K6: only a snapshot bound to the chain excuses a compacted gap.
  await checkChain(log, hasher, report, snapshotOk ? stored?.seq : undefined);
  if (stored && !snapshotOk) {
    const at = report.firstBadSeq ?? 0;
    const gapItExplains = report.problem === "missing" && at > 0 && at <= stored.seq;
    if (report.ok || gapItExplains) return bad(report, stored.seq, "snapshot");
  }
  return report;
}

function bad(report: VerifyReport, seq: number, problem: VerifyProblem): VerifyReport {
  report.ok = false;
  report.firstBadSeq = seq;
  report.problem = problem;
  return report;
}

/** K1..K5 over the events, into `report`; `compacted` the snapshot's sequence number (K3). */
async function checkChain(
  log: RawLog,
  hasher: AuditHasher,
  report: VerifyReport,
  compacted: number | undefined,
): Promise<VerifyReport> {
  const { executionId } = report;
  let expected = 0;
  let prevHash: string | undefined;
  let first: Envelope | undefined;
  for (;;) {
    const { rows: page, unreadable } = await readPage(log, executionId, expected);
    for (const e of page) {
      let linked = true;
      if (expected === 0 && e.seq !== 0) return bad(report, 0, "missing");
      if (e.seq !== expected) {
        if (e.seq < expected || e.seq - 1 > (compacted ?? -1)) {
          return bad(report, expected, "missing");
        }
        linked = false; // K3: a compacted gap; this event's prev cannot be checked.
        report.compactedThrough = e.seq - 1;
      }
      const hash = hashOf(e);
      if (hash === undefined) return bad(report, e.seq, "unhashed");
      if (!hasher.verifies(e, hash)) return bad(report, e.seq, "changed");
      if (e.seq > 0 && linked && prevOf(e) !== prevHash) return bad(report, e.seq, "broken link");
      if (e.seq === 0) first = e;
      prevHash = hash;
      expected = e.seq + 1;
      report.events++;
    }
    if (unreadable) return bad(report, expected, "unreadable");
    if (page.length < PAGE) break;
  }
  if (report.events === 0) return bad(report, 0, "missing");
  const head = await log.head(executionId);
  if (head >= expected) return bad(report, expected, "missing");
  if (prevHash !== undefined) report.headHash = prevHash;
  if (first && prevOf(first) !== undefined) {
    const link = await checkPredecessor(log, executionId, prevOf(first) as string);
    if (link) {
      report.predecessor = link;
      if (link.link === "broken") return bad(report, 0, "broken link");
    }
  }
  return report;
}

/** A page of the log from `from`; if a row in it cannot be read, "unreadable" (K4). */
async function readPage(
  log: RawLog,
  id: string,
  from: number,
): Promise<{ rows: Envelope[]; unreadable: boolean }> {
  try {
    return { rows: await log.readRaw(id, from, PAGE), unreadable: false };
  } catch {
    // Read one by one up to the row that fails: everything before it is checked first.
    const rows: Envelope[] = [];
    let at = from;
    for (let i = 0; i < PAGE; i++) {
      let one: Envelope[];
      try {
        one = await log.readRaw(id, at, 1);
      } catch {
        return { rows, unreadable: true };
      }
      const e = one[0];
      if (!e) break;
      rows.push(e);
      at = e.seq + 1;
    }
    return { rows, unreadable: false };
  }
}

async function checkPredecessor(
  log: RawLog,
  id: string,
  prev: string,
): Promise<VerifyReport["predecessor"]> {
  const start = await log.readStart(id);
  const p = start?.payload;
  const from =
    isPlainObject(p) && isPlainObject(p.continuedFrom) ? p.continuedFrom.executionId : undefined;
  if (typeof from !== "string") return undefined;
  const head = await log.head(from);
  if (head < 0) return { executionId: from, link: "released" };
  let expected = 0;
  let gap = false;
  for (let at = 0; ;) {
    const page = await log.readRaw(from, at, PAGE);
    for (const e of page) {
      if (hashOf(e) === prev) return { executionId: from, link: "verified" };
      if (e.seq !== expected) gap = true;
      expected = e.seq + 1;
    }
    const last = page[page.length - 1];
    if (!last || page.length < PAGE) {
      return { executionId: from, link: gap ? "compacted" : "broken" };
    }
    at = last.seq + 1;
  }
}
