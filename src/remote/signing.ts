/**
 * Request signing between an orchestrator and a worker server: a shared secret, HMAC-SHA256 over
 * `method + "\n" + path + "\n" + timestamp + "\n" + body`, sent hex-encoded.
 *
 * Invariants (tests cite A1..A4):
 * A1. A request is authentic only with both headers, a timestamp within MAX_SKEW_MS of the
 *     server's wall clock, and a signature equal to the expected one (compared in constant
 *     time). Every refusal has the same message (UNAUTHENTICATED_MESSAGE).
 * A2. The signature covers the method, the path with its query, the timestamp and every byte of
 *     the body, so none of them can be changed or moved to another endpoint.
 * A3. The secret never travels; only signatures do. A captured request can be replayed until
 *     its timestamp is stale, which is harmless here: dispatch and cancel are idempotent.
 * A4. Timestamps are wall time (`Date.now()`) on both sides, never a runtime's injected clock:
 *     a test clock or a simulated one must not decide whether a request is fresh.
 */
import { createHmac, timingSafeEqual, type Hmac } from "node:crypto";
import { InvalidInputError } from "../kernel/errors.ts";

export const TIMESTAMP_HEADER = "x-loom-timestamp";
export const SIGNATURE_HEADER = "x-loom-signature";
/** How far a request's timestamp may be from the server's wall clock, either way. */
export const MAX_SKEW_MS = 5 * 60_000;
/** The shortest secret accepted: a short shared secret is a guessable one. */
export const MIN_SECRET_LENGTH = 16;

const TIMESTAMP = /^[0-9]{1,15}$/;
const SIGNATURE = /^[0-9a-f]{64}$/i;

/** A secret of at least MIN_SECRET_LENGTH characters. */
export function checkedSecret(secret: unknown, what: string): string {
  if (typeof secret !== "string" || secret.length < MIN_SECRET_LENGTH) {
    throw new InvalidInputError(
      `${what} needs a secret of at least ${MIN_SECRET_LENGTH} characters`,
    );
  }
  return secret;
}

/** The headers that sign a request (A2), stamped with `nowMs` (default: wall time, A4). */
export function signedHeaders(
  secret: string,
  request: { method: string; path: string; body: string | Uint8Array },
  nowMs: number = Date.now(),
): Record<string, string> {
  const timestamp = String(Math.floor(nowMs));
  const hmac = start(secret, request.method, request.path, timestamp);
  if (typeof request.body === "string") hmac.update(request.body, "utf8");
  else hmac.update(request.body);
  return { [TIMESTAMP_HEADER]: timestamp, [SIGNATURE_HEADER]: hmac.digest("hex") };
}

/** The one message of every 401, so a refusal says nothing of why (not even of the clock). */
export const UNAUTHENTICATED_MESSAGE =
  "the request is not signed with this server's secret within the last few minutes";

/** A request's signing headers, well formed and fresh (A1's first half). */
export interface Signing {
  timestamp: string;
  signature: string;
}

/**
 * The request's signing headers when both are well formed and the timestamp is within
 * MAX_SKEW_MS of `nowMs`; undefined otherwise. It needs no body, so a request it refuses is
 * refused before a byte of its body is read.
 */
export function freshSigning(
  headers: { timestamp: unknown; signature: unknown },
  nowMs: number,
): Signing | undefined {
  const { timestamp, signature } = headers;
  if (typeof timestamp !== "string" || !TIMESTAMP.test(timestamp)) return undefined;
  if (typeof signature !== "string" || !SIGNATURE.test(signature)) return undefined;
  if (Math.abs(nowMs - Number(timestamp)) > MAX_SKEW_MS) return undefined;
  return { timestamp, signature };
}

/**
 * Checks a request's signature while its body streams in (A1's second half): the body need not
 * be kept whole to be verified, so an oversized one is still told apart from a forged one.
 */
export class SignatureCheck {
  private readonly hmac: Hmac;

  constructor(
    secret: string,
    request: { method: string; path: string },
    private readonly signing: Signing,
  ) {
    this.hmac = start(secret, request.method, request.path, signing.timestamp);
  }

  update(chunk: Buffer): void {
    this.hmac.update(chunk);
  }

  /** Whether the signature is the one the secret gives for everything seen (constant time). */
  matches(): boolean {
    const expected = this.hmac.digest();
    const given = Buffer.from(this.signing.signature, "hex");
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}

function start(secret: string, method: string, path: string, timestamp: string): Hmac {
  return createHmac("sha256", secret).update(`${method}\n${path}\n${timestamp}\n`, "utf8");
}
