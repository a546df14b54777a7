/**
 * Request and answer signing between an orchestrator and a worker server: a shared secret,
 * HMAC-SHA256 over the request's method, path, audience, timestamp, nonce and the SHA-256 digest
 * of its body, sent hex-encoded in headers, so a request is judged from its headers alone.
 *
 * Invariants (tests cite A1..A6):
 * A1. A request is authentic only with every signing header well formed, a timestamp within
 *     MAX_SKEW_MS of the server's wall clock, the server's own audience, and a signature equal
 *     to the expected one (compared in constant time). All of it is judged from the headers,
 *     before a byte of the body is read. Every refusal has the same message
 *     (UNAUTHENTICATED_MESSAGE).
 * A2. The signature covers the method, the path with its query, the audience, the timestamp, the
 *     nonce and the body's digest, so none of them can be changed or moved to another endpoint;
 *     the body is held to its digest once read (request-body.ts B5).
 * A3. The secret never travels; only signatures do. A nonce is taken once: the server keeps each
 *     nonce it accepted until its timestamp is stale (NonceLedger), so a captured request sent
 *     again is refused, whatever became of what it did. A restarted server forgets its nonces:
 *     for MAX_SKEW_MS after a restart a request captured before it can be replayed once.
 * A4. Timestamps are wall time (`Date.now()`) on both sides, never a runtime's injected clock:
 *     a test clock or a simulated one must not decide whether a request is fresh.
 * A5. The audience is the worker's id (by default the origin it listens on): a request signed
 *     for one worker is refused by every other, though they share the secret.
 * A6. An answer to an authentic request is signed over the request's nonce, the audience, the
 *     status and the digest of the answer's body; a client takes no answer that is not (a forged
 *     or replayed answer is a refusal, never a start or an error of the worker's).
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { InvalidInputError } from "../kernel/errors.ts";

export const TIMESTAMP_HEADER = "x-loom-timestamp";
export const NONCE_HEADER = "x-loom-nonce";
export const AUDIENCE_HEADER = "x-loom-audience";
export const DIGEST_HEADER = "x-loom-content-sha256";
export const SIGNATURE_HEADER = "x-loom-signature";
/** How far a request's timestamp may be from the server's wall clock, either way. */
export const MAX_SKEW_MS = 5 * 60_000;
/** The shortest secret accepted: a short shared secret is a guessable one. */
export const MIN_SECRET_LENGTH = 16;

const TIMESTAMP = /^[0-9]{1,15}$/;
const HEX64 = /^[0-9a-f]{64}$/i;
const NONCE = /^[A-Za-z0-9_-]{16,128}$/;
const AUDIENCE = /^[\x21-\x7e]{1,256}$/;

/** A secret of at least MIN_SECRET_LENGTH characters. */
export function checkedSecret(secret: unknown, what: string): string {
  if (typeof secret !== "string" || secret.length < MIN_SECRET_LENGTH) {
    throw new InvalidInputError(
      `${what} needs a secret of at least ${MIN_SECRET_LENGTH} characters`,
    );
  }
  return secret;
}

/** A worker id to sign for (A5): printable ASCII without spaces, at most 256 characters. */
export function checkedAudience(audience: unknown, what: string): string {
  if (typeof audience !== "string" || !AUDIENCE.test(audience)) {
    throw new InvalidInputError(
      `${what} needs a worker id of 1 to 256 printable characters without spaces`,
    );
  }
  return audience;
}

/** The SHA-256 of a body, hex-encoded. */
export function digestOf(body: string | Uint8Array): string {
  const hash = createHash("sha256");
  if (typeof body === "string") hash.update(body, "utf8");
  else hash.update(body);
  return hash.digest("hex");
}

/** What a request's signature covers (A2). */
export interface RequestSigning {
  method: string;
  path: string;
  audience: string;
  timestamp: string;
  nonce: string;
  digest: string;
}

/**
 * The headers that sign a request (A2) for the worker `audience` (A5), stamped with `nowMs`
 * (default: wall time, A4) and a fresh random nonce (A3).
 */
export function signedHeaders(
  secret: string,
  request: { method: string; path: string; body: string | Uint8Array; audience: string },
  nowMs: number = Date.now(),
): Record<string, string> {
  const signing: RequestSigning = {
    method: request.method,
    path: request.path,
    audience: request.audience,
    timestamp: String(Math.floor(nowMs)),
    nonce: randomBytes(18).toString("base64url"),
    digest: digestOf(request.body),
  };
  return {
    [TIMESTAMP_HEADER]: signing.timestamp,
    [NONCE_HEADER]: signing.nonce,
    [AUDIENCE_HEADER]: signing.audience,
    [DIGEST_HEADER]: signing.digest,
    [SIGNATURE_HEADER]: requestMac(secret, signing).toString("hex"),
  };
}

/** The one message of every 401, so a refusal says nothing of why (not even of the clock). */
export const UNAUTHENTICATED_MESSAGE =
  "the request is not signed with this server's secret within the last few minutes";

/**
 * The request's signing when its headers are well formed, fresh within MAX_SKEW_MS of `nowMs`,
 * for `audience`, and signed with `secret` (A1); undefined otherwise. It needs no body: the body
 * is held to `digest` once read. The nonce is not taken here (NonceLedger).
 */
export function verifiedSigning(
  secret: string,
  audience: string,
  request: { method: string; path: string; headers: Record<string, unknown> },
  nowMs: number,
): RequestSigning | undefined {
  const h = request.headers;
  const [timestamp, nonce, claimed, digest, signature] = [
    h[TIMESTAMP_HEADER],
    h[NONCE_HEADER],
    h[AUDIENCE_HEADER],
    h[DIGEST_HEADER],
    h[SIGNATURE_HEADER],
  ];
  if (typeof timestamp !== "string" || !TIMESTAMP.test(timestamp)) return undefined;
  if (typeof nonce !== "string" || !NONCE.test(nonce)) return undefined;
  if (claimed !== audience) return undefined;
  if (typeof digest !== "string" || !HEX64.test(digest)) return undefined;
  if (typeof signature !== "string" || !HEX64.test(signature)) return undefined;
  if (Math.abs(nowMs - Number(timestamp)) > MAX_SKEW_MS) return undefined;
  const signing = { method: request.method, path: request.path, audience, timestamp, nonce };
  const verified = { ...signing, digest: digest.toLowerCase() };
  return sameMac(requestMac(secret, verified), signature) ? verified : undefined;
}

/** The header that signs an answer (A6). */
export function answerSignature(
  secret: string,
  answer: { audience: string; nonce: string; status: number; body: string | Uint8Array },
): string {
  const text = `loom-answer-v2\n${answer.audience}\n${answer.nonce}\n${answer.status}\n${digestOf(answer.body)}`;
  return createHmac("sha256", secret).update(text, "utf8").digest("hex");
}

/** Whether an answer carries the signature the secret gives it (A6, constant time). */
export function answerIsSigned(
  secret: string,
  answer: { audience: string; nonce: string; status: number; body: string | Uint8Array },
  signature: unknown,
): boolean {
  if (typeof signature !== "string" || !HEX64.test(signature)) return false;
  return sameMac(Buffer.from(answerSignature(secret, answer), "hex"), signature);
}

/**
 * The nonces a server has accepted, each kept until its timestamp is stale (A3): a nonce seen
 * again within that time is refused. Only authentic requests get here, so what it holds is
 * bounded by what the secret's holders send.
 */
export class NonceLedger {
  private readonly expiresAt = new Map<string, number>();
  private sweepAtMs = 0;

  /** Takes `nonce` (signed at `timestampMs`); false when it was taken already. */
  take(nonce: string, timestampMs: number, nowMs: number): boolean {
    this.sweep(nowMs);
    if (this.expiresAt.has(nonce)) return false;
    this.expiresAt.set(nonce, timestampMs + MAX_SKEW_MS);
    return true;
  }

  get size(): number {
    return this.expiresAt.size;
  }

  /** Forgets the nonces whose timestamps are stale, at most once a second. */
  private sweep(nowMs: number): void {
    if (nowMs < this.sweepAtMs) return;
    this.sweepAtMs = nowMs + 1_000;
    for (const [nonce, expiresAtMs] of this.expiresAt) {
      if (expiresAtMs < nowMs) this.expiresAt.delete(nonce);
    }
  }
}

function requestMac(secret: string, s: RequestSigning): Buffer {
  const text = `loom-request-v2\n${s.method}\n${s.path}\n${s.audience}\n${s.timestamp}\n${s.nonce}\n${s.digest}`;
  return createHmac("sha256", secret).update(text, "utf8").digest();
}

function sameMac(expected: Buffer, givenHex: string): boolean {
  const given = Buffer.from(givenHex, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}
