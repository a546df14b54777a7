/**
 * Request signing between an orchestrator and a worker server: a shared secret, HMAC-SHA256 over
 * `method + "\n" + path + "\n" + timestamp + "\n" + body`, sent hex-encoded.
 *
 * Invariants (tests cite A1..A3):
 * A1. A request is authentic only with both headers, a timestamp within MAX_SKEW_MS of the
 *     server's clock, and a signature equal to the expected one (compared in constant time).
 * A2. The signature covers the method, the path with its query, the timestamp and every byte of
 *     the body, so none of them can be changed or moved to another endpoint.
 * A3. The secret never travels; only signatures do. A captured request can be replayed until
 *     its timestamp is stale, which is harmless here: dispatch and cancel are idempotent.
 */
import { createHmac, timingSafeEqual, type Hmac } from "node:crypto";
import { InvalidInputError } from "../kernel/errors.ts";

export const TIMESTAMP_HEADER = "x-loom-timestamp";
export const SIGNATURE_HEADER = "x-loom-signature";
/** How far a request's timestamp may be from the server's clock, either way. */
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

/** The headers that sign a request (A2), stamped with `nowMs`. */
export function signedHeaders(
  secret: string,
  request: { method: string; path: string; body: string | Uint8Array },
  nowMs: number,
): Record<string, string> {
  const timestamp = String(Math.floor(nowMs));
  const hmac = start(secret, request.method, request.path, timestamp);
  if (typeof request.body === "string") hmac.update(request.body, "utf8");
  else hmac.update(request.body);
  return { [TIMESTAMP_HEADER]: timestamp, [SIGNATURE_HEADER]: hmac.digest("hex") };
}

/**
 * Checks a request's signature while its body streams in (the body need not be kept whole to be
 * verified, so an oversized one is still told apart from a forged one).
 */
export class SignatureCheck {
  private readonly hmac: Hmac;
  private readonly timestamp: string | undefined;
  private readonly signature: string | undefined;

  constructor(
    secret: string,
    request: { method: string; path: string; timestamp: unknown; signature: unknown },
  ) {
    this.timestamp =
      typeof request.timestamp === "string" && TIMESTAMP.test(request.timestamp)
        ? request.timestamp
        : undefined;
    this.signature =
      typeof request.signature === "string" && SIGNATURE.test(request.signature)
        ? request.signature
        : undefined;
    this.hmac = start(secret, request.method, request.path, this.timestamp ?? "");
  }

  update(chunk: Buffer): void {
    this.hmac.update(chunk);
  }

  /** Undefined when the request is authentic (A1), else why it is not (for the 401's message). */
  verdict(nowMs: number): string | undefined {
    if (this.timestamp === undefined || this.signature === undefined) {
      return `the request is not signed (headers ${TIMESTAMP_HEADER} and ${SIGNATURE_HEADER})`;
    }
    if (Math.abs(nowMs - Number(this.timestamp)) > MAX_SKEW_MS) {
      return `the request's timestamp is more than ${MAX_SKEW_MS / 60_000} minutes from the server's clock`;
    }
    const expected = this.hmac.digest();
    const given = Buffer.from(this.signature, "hex");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return "the request's signature is wrong";
    }
    return undefined;
  }
}

function start(secret: string, method: string, path: string, timestamp: string): Hmac {
  return createHmac("sha256", secret).update(`${method}\n${path}\n${timestamp}\n`, "utf8");
}
