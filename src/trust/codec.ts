/**
 * Payload codecs: what seals a payload before a store writes it, and opens it when it is read.
 *
 * Invariants (tests cite C1..C4):
 * C1. A sealed payload names the key that sealed it; opening it needs exactly that key, so a
 *     codec given its old keys opens everything written before a rotation (`currentKeyId` moves,
 *     old ids stay in `keys`).
 * C2. Sealing binds the payload to where it belongs (`aad`: the execution, sequence number and
 *     kind of an event): a sealed payload copied to another place does not open.
 * C3. A changed byte, a wrong key or a missing key is a typed error (CodecError, CodecKeyError),
 *     never a wrong plaintext.
 * C4. AES-256-GCM (node:crypto) with a 96-bit nonce that never repeats under one key in practice:
 *     a random 96-bit base per process, re-drawn every 2^31 payloads, whose last 32 bits count
 *     up (NIST SP 800-38D 8.2.1's invocation field; two processes' ranges overlap with
 *     probability about 2^-64). A random nonce per payload costs a random draw each time, the
 *     largest part of sealing a small payload. The sealed form is nonce (12 bytes) | tag
 *     (16 bytes) | ciphertext.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { CodecError, CodecKeyError, InvalidInputError } from "../kernel/errors.ts";

/**
 * Seals and opens payload bytes. Pluggable: a codec backed by a KMS implements the same two
 * methods (they may be async). `aesGcmCodec` is the built-in one.
 */
export interface PayloadCodec {
  /** Recorded beside every payload it seals (the envelope's `meta.codec`). */
  readonly name: string;
  /** Seals `plain`; returns the sealed bytes and the id of the key that sealed them. */
  seal(
    plain: Uint8Array,
    aad: string,
  ): { keyId: string; sealed: Uint8Array } | Promise<{ keyId: string; sealed: Uint8Array }>;
  /** Opens what `seal` made with key `keyId` and the same `aad` (C1..C3). */
  open(sealed: Uint8Array, keyId: string, aad: string): Uint8Array | Promise<Uint8Array>;
}

export interface AesGcmCodecOptions {
  /** Key id -> a 32-byte key (a Buffer, or 64 hex characters, or base64 of 32 bytes). */
  keys: Record<string, Uint8Array | string>;
  /** The key new payloads are sealed with; the others only open what they sealed before. */
  currentKeyId: string;
}

export const AES_GCM = "aes-256-gcm";
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * The built-in codec: AES-256-GCM on node:crypto, with named keys for rotation (C1).
 *
 * @example
 * const codec = aesGcmCodec({ keys: { k1: process.env.LOOM_KEY_K1! }, currentKeyId: "k1" });
 * const runtime = createRuntime({ store: sqliteStore("loom.db"), codec });
 */
export function aesGcmCodec(options: AesGcmCodecOptions): PayloadCodec {
  if (options === null || typeof options !== "object") {
    throw new InvalidInputError("aesGcmCodec needs { keys, currentKeyId }");
  }
  const keys = new Map<string, Buffer>();
  for (const [id, key] of Object.entries(options.keys ?? {})) {
    if (!KEY_ID.test(id)) {
      throw new InvalidInputError(
        `codec key id ${JSON.stringify(id)} must be 1 to 64 letters, digits, '.', '_' or '-'`,
      );
    }
    keys.set(id, keyBytes(key, id));
  }
  const current = keys.get(options.currentKeyId);
  if (!current) {
    throw new InvalidInputError(
      `codec currentKeyId ${JSON.stringify(options.currentKeyId)} is not one of its keys`,
    );
  }
  const currentKeyId = options.currentKeyId;
  return {
    name: AES_GCM,
    seal(plain, aad) {
      return { keyId: currentKeyId, sealed: aesGcmSeal(current, plain, aad) };
    },
    open(sealed, keyId, aad) {
      const key = keys.get(keyId);
      if (!key) {
        throw new CodecKeyError(`payload sealed with codec key "${keyId}", which is not given`, {
          keyId,
        });
      }
      return aesGcmOpen(key, sealed, aad);
    },
  };
}

let nonceBase = randomBytes(NONCE_BYTES);
let nonceCount = 0;

/** C4: the next nonce of this process. */
function nextNonce(): Buffer {
  if (nonceCount >= 2 ** 31) {
    nonceBase = randomBytes(NONCE_BYTES);
    nonceCount = 0;
  }
  const nonce = Buffer.from(nonceBase);
  nonce.writeUInt32BE((nonceBase.readUInt32BE(8) + nonceCount++) >>> 0, 8);
  return nonce;
}

/**
 * Additional data (C2) names what a sealed value is and where it belongs, as a JSON array with a
 * domain tag, so no two places share one (ids and names may hold any character).
 */
export function aad(...parts: (string | number)[]): string {
  return JSON.stringify(parts);
}

/** C4: nonce | tag | ciphertext. */
export function aesGcmSeal(key: Buffer, plain: Uint8Array, aad: string): Buffer {
  const nonce = nextNonce();
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(aad, "utf8"));
  // One buffer, written in place: GCM's ciphertext is as long as the plaintext.
  const out = Buffer.allocUnsafe(NONCE_BYTES + TAG_BYTES + plain.byteLength);
  nonce.copy(out, 0);
  const body = cipher.update(plain);
  body.copy(out, NONCE_BYTES + TAG_BYTES);
  cipher.final(); // nothing more for GCM; it computes the tag
  cipher.getAuthTag().copy(out, NONCE_BYTES);
  return out;
}

/** Opens `aesGcmSeal`'s output; a changed byte or another key is CodecError (C3). */
export function aesGcmOpen(key: Buffer, sealed: Uint8Array, aad: string): Buffer {
  const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  if (bytes.length < NONCE_BYTES + TAG_BYTES) {
    throw new CodecError("sealed payload is too short to be AES-256-GCM");
  }
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(0, NONCE_BYTES));
    decipher.setAAD(Buffer.from(aad, "utf8"));
    decipher.setAuthTag(bytes.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES));
    return Buffer.concat([
      decipher.update(bytes.subarray(NONCE_BYTES + TAG_BYTES)),
      decipher.final(),
    ]);
  } catch {
    throw new CodecError(
      "sealed payload did not open: it was changed, or sealed with another key or for another place",
    );
  }
}

function keyBytes(key: Uint8Array | string, id: string): Buffer {
  let bytes: Buffer | undefined;
  if (typeof key === "string") {
    if (/^[0-9a-fA-F]{64}$/.test(key)) bytes = Buffer.from(key, "hex");
    else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(key)) bytes = Buffer.from(key, "base64");
  } else if (key instanceof Uint8Array) {
    bytes = Buffer.from(key);
  }
  if (!bytes || bytes.length !== 32) {
    throw new InvalidInputError(
      `codec key "${id}" must be 32 bytes: a Buffer, 64 hex characters or base64`,
    );
  }
  return bytes;
}
