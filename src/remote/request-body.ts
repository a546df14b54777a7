/**
 * Reads a worker server request's body: refused from its headers when they already condemn it,
 * bounded in memory while it streams, verified as it streams (signing.ts), and decoded as UTF-8
 * JSON text.
 *
 * Invariants (tests cite B1..B4):
 * B1. A request whose signing headers are missing, malformed or stale is refused (401) before a
 *     byte of its body is read, and one whose Content-Length is over the limit (413) likewise.
 *     Every refusal closes the connection, and what the client still sends is dropped unread.
 * B2. No body is held past `maxBodyBytes`: bytes past the limit are hashed and dropped, so an
 *     oversized body is still told apart from a forged one (401 before 413), and its sender gets
 *     an answer, not a reset.
 * B3. The bytes held across all requests whose signature is not verified yet are at most
 *     `UnverifiedBytes.maxBytes`; a request that would go past it is answered 503 at once and
 *     its connection closed. A body's bytes are given back the moment it is verified or refused.
 * B4. JSON text is checked for depth (json-depth.ts) before it is parsed.
 */
import type { IncomingMessage } from "node:http";
import {
  InvalidInputError,
  PayloadTooLargeError,
  UnauthenticatedError,
  WorkerRefusedError,
  type LoomError,
} from "../kernel/errors.ts";
import { MAX_JSON_DEPTH, assertTextDepth } from "./json-depth.ts";
import {
  SIGNATURE_HEADER,
  SignatureCheck,
  TIMESTAMP_HEADER,
  UNAUTHENTICATED_MESSAGE,
  freshSigning,
} from "./signing.ts";

/** The largest body a worker server reads (1 MiB). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** The most body bytes a worker server holds, across requests, before they are verified. */
export const MAX_UNVERIFIED_BYTES = 16 * MAX_BODY_BYTES;

/** The verified body's text, or the refusal (whose answer closes the connection: B1, B3). */
export type BodyRead = { ok: true; text: string } | { ok: false; error: LoomError };

/** The bytes a server holds of bodies whose signature is not verified yet (B3). */
export class UnverifiedBytes {
  private heldBytes = 0;

  constructor(readonly maxBytes: number) {}

  get held(): number {
    return this.heldBytes;
  }

  /** Takes `bytes` from the allowance, or returns false (and takes nothing) when they do not fit. */
  take(bytes: number): boolean {
    if (this.heldBytes + bytes > this.maxBytes) return false;
    this.heldBytes += bytes;
    return true;
  }

  give(bytes: number): void {
    this.heldBytes -= bytes;
  }
}

export interface BodyLimits {
  secret: string;
  maxBodyBytes: number;
  unverified: UnverifiedBytes;
}

/**
 * The request's body text once it is known to be authentic (A1), within `maxBodyBytes`, and
 * UTF-8; otherwise the refusal: UnauthenticatedError, PayloadTooLargeError, a WorkerRefusedError
 * when the server holds too much unverified already, InvalidInputError. An unauthenticated
 * caller learns nothing beyond the 401.
 */
export function readSignedBody(req: IncomingMessage, limits: BodyLimits): Promise<BodyRead> {
  const signing = freshSigning(
    { timestamp: req.headers[TIMESTAMP_HEADER], signature: req.headers[SIGNATURE_HEADER] },
    Date.now(),
  );
  if (signing === undefined) return Promise.resolve(refused(unauthenticated()));
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limits.maxBodyBytes) {
    return Promise.resolve(refused(tooLarge(declared, limits.maxBodyBytes)));
  }
  const check = new SignatureCheck(
    limits.secret,
    { method: req.method ?? "", path: req.url ?? "" },
    signing,
  );
  return new Promise<BodyRead>((resolve) => {
    const kept: Buffer[] = [];
    let bytes = 0;
    let held = 0;
    const settle = (read: BodyRead) => {
      req.off("data", onData).off("end", onEnd).off("error", onBroken).off("close", onBroken);
      limits.unverified.give(held);
      held = 0;
      kept.length = 0;
      resolve(read);
    };
    const onData = (chunk: Buffer) => {
      check.update(chunk);
      bytes += chunk.length;
      if (bytes > limits.maxBodyBytes) {
        // B2: hashed, not kept; what was kept is given back.
        limits.unverified.give(held);
        held = 0;
        kept.length = 0;
      } else if (limits.unverified.take(chunk.length)) {
        held += chunk.length;
        kept.push(chunk);
      } else {
        settle(refused(busy(limits.unverified.maxBytes)));
      }
    };
    const onEnd = () => {
      if (!check.matches()) return settle(refused(unauthenticated()));
      if (bytes > limits.maxBodyBytes) return settle(refused(tooLarge(bytes, limits.maxBodyBytes)));
      let text: string;
      try {
        text = utf8.decode(Buffer.concat(kept));
      } catch {
        return settle(refused(new InvalidInputError("the request body is not valid UTF-8")));
      }
      settle({ ok: true, text });
    };
    const onBroken = () => {
      settle(refused(new InvalidInputError("the request broke off before its body ended")));
    };
    req.on("data", onData).on("end", onEnd).on("error", onBroken).on("close", onBroken);
  });
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The JSON value of a body's text (B4); InvalidInputError (a 400) when it is not JSON or nests
 * deeper than an input may, one level being the request object itself.
 */
export function parseBody(text: string): unknown {
  assertTextDepth(text, "the request body", MAX_JSON_DEPTH + 1);
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    throw new InvalidInputError(`the request body is not valid JSON (${reason})`);
  }
}

function refused(error: LoomError): BodyRead {
  return { ok: false, error };
}

function unauthenticated(): LoomError {
  return new UnauthenticatedError(UNAUTHENTICATED_MESSAGE);
}

function tooLarge(bytes: number, maxBytes: number): LoomError {
  return new PayloadTooLargeError(
    `the request body is ${bytes} bytes, over the limit of ${maxBytes}`,
    { bytes, maxBytes },
  );
}

function busy(maxBytes: number): LoomError {
  return new WorkerRefusedError(
    `the worker holds ${maxBytes} bytes of request bodies not yet verified; try again shortly`,
    { maxUnverifiedBytes: maxBytes },
  );
}
