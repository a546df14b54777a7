/**
 * Data subjects' keys (issue 10): each subject's data is sealed with a random key of its own,
 * kept in the store's key material (S19), sealed by the payload codec when there is one, and
 * destroyed by eraseSubject (crypto-shredding).
 *
 * Invariants (the sealing store's V9, sealed-store.ts):
 * K1. A key is made only when asked to `create` (an execution's first batch), after reading the
 *     store, never this process's memory: a key another process destroyed is not brought back
 *     from a cache.
 * K2. Otherwise a key read from the store is kept in memory for at most SUBJECT_KEY_TTL_MS;
 *     `mustHave` refuses (CodecKeyError) when the key is gone, so nothing more of an erased
 *     subject is written.
 */
import { randomBytes } from "node:crypto";
import type { Clock } from "../kernel/clock.ts";
import { CodecKeyError } from "../kernel/errors.ts";
import type { KeyStore } from "../store/spi.ts";
import { aad, type PayloadCodec } from "./codec.ts";

/** How long a process keeps a subject's key in memory after reading it from the store. */
export const SUBJECT_KEY_TTL_MS = 30_000;
const SUBJECT_KEY = "subject:";
const SUBJECT_INDEX = "subject-index:";
/** The most subjects' keys a process remembers. */
const MAX_KNOWN = 10_000;

/** The key id of `subject`'s key, in the store and in a sealed envelope's `meta.keyId`. */
export function subjectKeyId(subject: string): string {
  return `${SUBJECT_KEY}${encodeURIComponent(subject)}`;
}

/** The subject a key id names, or undefined for a codec's own key. */
export function subjectOfKeyId(keyId: string): string | undefined {
  return keyId.startsWith(SUBJECT_KEY)
    ? decodeURIComponent(keyId.slice(SUBJECT_KEY.length))
    : undefined;
}

/** The prefix of the index entries naming the executions that hold `subject`'s data (V6). */
export function subjectIndexPrefix(subject: string): string {
  return `${SUBJECT_INDEX}${encodeURIComponent(subject)}/`;
}

export class SubjectKeys {
  private readonly cache = new Map<string, { key: Buffer; atMs: number }>();

  constructor(
    private readonly store: KeyStore,
    private readonly codec: PayloadCodec | undefined,
    private readonly clock: Clock,
  ) {}

  /** The subject's key: from memory (K2), or the store; made there when `create` (K1). */
  async get(subject: string, create: boolean): Promise<Buffer | undefined> {
    const now = this.clock.now();
    const cached = this.cache.get(subject);
    if (!create && cached && now - cached.atMs < SUBJECT_KEY_TTL_MS) return cached.key;
    const id = subjectKeyId(subject);
    let material = await this.store.getKey(id);
    if (material === undefined) {
      if (!create) {
        this.cache.delete(subject);
        return undefined;
      }
      material = await this.store.putKey(id, await this.wrap(randomBytes(32), subject));
    }
    const key = await this.unwrap(material, subject);
    if (this.cache.size >= MAX_KNOWN) this.cache.clear();
    this.cache.set(subject, { key, atMs: now });
    return key;
  }

  /** K2: the key of a subject whose data is being written; gone (erased) is a refusal. */
  async mustHave(subject: string): Promise<Buffer> {
    const key = await this.get(subject, false);
    if (!key) {
      throw new CodecKeyError(
        `data subject "${subject}" was erased: no more of its data is written`,
        { subject },
      );
    }
    return key;
  }

  forget(subject: string): void {
    this.cache.delete(subject);
  }

  private async wrap(key: Buffer, subject: string): Promise<string> {
    if (!this.codec) return `raw:${key.toString("base64")}`;
    const out = await this.codec.seal(key, aad("subject-key", subject));
    const data = Buffer.from(out.sealed).toString("base64");
    return `sealed:${encodeURIComponent(this.codec.name)}:${encodeURIComponent(out.keyId)}:${data}`;
  }

  private async unwrap(material: string, subject: string): Promise<Buffer> {
    const [form, a, b, c] = material.split(":");
    if (form === "raw" && a !== undefined) return Buffer.from(a, "base64");
    if (form === "sealed" && a !== undefined && b !== undefined && c !== undefined) {
      const codec = decodeURIComponent(a);
      const keyId = decodeURIComponent(b);
      if (!this.codec || this.codec.name !== codec) {
        throw new CodecKeyError(
          `the key of data subject "${subject}" is sealed with codec "${codec}", which this runtime does not have`,
          { codec, keyId },
        );
      }
      const plain = await this.codec.open(
        Buffer.from(c, "base64"),
        keyId,
        aad("subject-key", subject),
      );
      return Buffer.from(plain);
    }
    throw new CodecKeyError(`the stored key of data subject "${subject}" is unreadable`);
  }
}
