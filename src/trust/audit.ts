/**
 * The audit chain: every envelope carries its predecessor's hash and its own.
 *
 * Invariants (tests cite A1..A5):
 * A1. `meta.hash` of an envelope is SHA-256 (HMAC-SHA-256 when the audit has a key) over the
 *     canonical JSON (sorted keys, kernel/json.ts canonicalJson) of the envelope as stored, with
 *     `meta.prev` in it and `meta.hash` out of it: so it covers the execution id, the sequence
 *     number, the kind, the time, the payload as stored (sealed, when a codec seals it) and the
 *     rest of the meta.
 * A2. `meta.prev` of sequence n > 0 is `meta.hash` of sequence n - 1. A successor's sequence 0
 *     names its predecessor's head hash at the successor's start (ADR 0109 D2: the successor
 *     starts before the predecessor commits EXECUTION_CONTINUED); any other sequence 0 has none.
 * A3. A hash is over stored bytes, so destroying a subject's key (erasure) leaves every hash
 *     valid, and a compaction that deletes events leaves the remaining ones verifiable one by one
 *     (each keeps its `prev`), with the head hash unchanged.
 * A4. Without a key, the chain detects any edit, deletion or reordering by someone who does not
 *     rewrite every later hash too; with a key, also by someone who does.
 */
import { createHash, createHmac } from "node:crypto";
import type { Envelope, EnvelopeMeta } from "../kernel/events.ts";
import { canonicalJson } from "../kernel/json.ts";

/** `true` (SHA-256), or a key for HMAC-SHA-256 (A4). */
export type AuditSetting = boolean | { key: string | Uint8Array };

export class AuditHasher {
  private readonly key: Buffer | undefined;

  constructor(setting: Exclude<AuditSetting, false>) {
    this.key =
      setting === true
        ? undefined
        : Buffer.from(
            typeof setting.key === "string" ? Buffer.from(setting.key, "utf8") : setting.key,
          );
  }

  /** A1: the hash of `e` as stored, with `e.meta.prev` in and `e.meta.hash` out. */
  digest(e: Envelope): string {
    const h = this.key ? createHmac("sha256", this.key) : createHash("sha256");
    h.update(canonicalJson(hashedForm(e)), "utf8");
    return h.digest("base64url");
  }

  /** `e` with `prev` and its hash in its meta (A1, A2): what the store writes. */
  stamp(e: Envelope, prev: string | undefined): Envelope {
    const meta: EnvelopeMeta = { ...e.meta };
    delete meta.hash;
    if (prev === undefined) delete meta.prev;
    else meta.prev = prev;
    const out: Envelope = { ...e, meta };
    meta.hash = this.digest(out);
    return out;
  }
}

function hashedForm(e: Envelope): object {
  const meta: EnvelopeMeta = { ...e.meta };
  delete meta.hash;
  const out: Record<string, unknown> = {
    executionId: e.executionId,
    seq: e.seq,
    kind: e.kind,
    at: e.at,
    payload: e.payload,
  };
  if (Object.keys(meta).length > 0) out.meta = meta;
  return out;
}

export function hashOf(e: Envelope | undefined): string | undefined {
  const h = e?.meta?.hash;
  return typeof h === "string" ? h : undefined;
}

export function prevOf(e: Envelope): string | undefined {
  const p = e.meta?.prev;
  return typeof p === "string" ? p : undefined;
}
