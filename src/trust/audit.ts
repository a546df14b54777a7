/**
 * The audit chain: every envelope carries its predecessor's hash and its own.
 *
 * Invariants (tests cite A1..A5):
 * A1. `meta.hash` of an envelope is SHA-256 (HMAC-SHA-256 when the audit has a key) over the
 *     canonical JSON (sorted keys, kernel/json.ts canonicalJson) of the envelope as stored, with
 *     `meta.prev` in it and `meta.hash` out of it, and the hash form's number (`form: 2`): so it
 *     covers the execution id, the sequence number, the kind, the time, the payload as stored
 *     (sealed, when a codec seals it), content under own `__proto__` keys included, and the rest
 *     of the meta.
 * A2. `meta.prev` of sequence n > 0 is `meta.hash` of sequence n - 1. A successor's sequence 0
 *     names its predecessor's head hash at the successor's start (ADR 0109 D2: the successor
 *     starts before the predecessor commits EXECUTION_CONTINUED); any other sequence 0 has none.
 * A3. A hash is over stored bytes, so destroying a subject's key (erasure) leaves every hash
 *     valid, and a compaction that deletes events leaves the remaining ones verifiable one by one
 *     (each keeps its `prev`), with the head hash unchanged.
 * A4. Without a key, the chain detects any edit, deletion or reordering by someone who does not
 *     rewrite every later hash too; with a key, also by someone who does.
 * A5. Events stamped before issue 22 were hashed over form 1: the same canonical JSON with no
 *     `form` and with own `__proto__` keys left out (they set the copy's prototype). Such an event
 *     still verifies (`verifies` accepts either form); form 2's `form` field keeps the two apart,
 *     so a form-2 event never passes as form 1 with its `__proto__` content changed. The two
 *     canonical texts agree on every value without a `__proto__` key.
 */
import { createHash, createHmac } from "node:crypto";
import type { Envelope, EnvelopeMeta } from "../kernel/events.ts";
import { canonicalJson } from "../kernel/json.ts";

/** `true` (SHA-256), or a key for HMAC-SHA-256 (A4). */
export type AuditSetting = boolean | { key: string | Uint8Array };

/** A1: the number of the hash form this version stamps. */
const FORM = 2;

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
    return this.digestText(canonicalJson(hashedForm(e, FORM)));
  }

  /** A1, A5: whether `hash` is `e`'s hash in this form or the one before it. */
  verifies(e: Envelope, hash: string): boolean {
    return this.digest(e) === hash || this.digestText(formOneJson(hashedForm(e, 1))) === hash;
  }

  /**
   * The digest of `parts`' UTF-8 bytes, in order (a snapshot's binding uses it too:
   * snapshot-binding.ts). Fed part by part: a large state's text is never copied into one string.
   */
  digestText(...parts: string[]): string {
    const h = this.key ? createHmac("sha256", this.key) : createHash("sha256");
    for (const part of parts) h.update(part, "utf8");
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

/** A1: what is hashed; form 1 (A5) has no `form` field. */
function hashedForm(e: Envelope, form: number): Record<string, unknown> {
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
  if (form !== 1) out.form = form;
  return out;
}

/** A5: form 1's canonical text, as events stamped before issue 22 were hashed over. */
function formOneJson(value: unknown): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (v === null || typeof v !== "object") return v;
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) {
      if (k !== "__proto__") out[k] = sort((v as Record<string, unknown>)[k]);
    }
    return out;
  };
  return JSON.stringify(sort(value));
}

export function hashOf(e: Envelope | undefined): string | undefined {
  const h = e?.meta?.hash;
  return typeof h === "string" ? h : undefined;
}

export function prevOf(e: Envelope): string | undefined {
  const p = e.meta?.prev;
  return typeof p === "string" ? p : undefined;
}
