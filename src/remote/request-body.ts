/**
 * Reads a worker server request's body: refused from its headers when they do not authenticate
 * it (signing.ts A1), bounded in memory while it streams, held to the digest its signature
 * covers, and decoded as UTF-8 JSON text.
 *
 * Invariants (tests cite B1..B5):
 * B1. A request whose signing headers are missing, malformed, stale, for another audience, not
 *     signed with the secret, or whose nonce was taken already (A3), is refused (401) before a
 *     byte of its body is read, and one whose Content-Length is over the limit (413) likewise.
 *     Every refusal closes the connection, and what the client still sends is dropped unread.
 * B2. No body is held past `maxBodyBytes`: bytes past the limit are hashed and dropped, so an
 *     oversized body is still told apart from a tampered one (401 before 413), and its sender
 *     gets an answer, not a reset.
 * B3. The bytes held of bodies whose digest is not checked yet are at most
 *     `UnverifiedBytes.maxBytes` per client address; a request that would go past it is answered
 *     503 at once and its connection closed. A body's bytes are given back the moment it is
 *     checked or refused. Only a client with the secret gets this far (B1).
 * B4. JSON text is checked for depth (json-depth.ts) before it is parsed.
 * B5. A body whose SHA-256 is not the digest its headers signed is refused (401).
 */
import type { IncomingMessage } from "node:http";
import { createHash } from "node:crypto";
import {
  InvalidInputError,
  PayloadTooLargeError,
  UnauthenticatedError,
  WorkerRefusedError,
  type LoomError,
} from "../kernel/errors.ts";
import { MAX_JSON_DEPTH, assertTextDepth } from "./json-depth.ts";
import {
  UNAUTHENTICATED_MESSAGE,
  verifiedSigning,
  type NonceLedger,
  type RequestSigning,
} from "./signing.ts";

/** The largest body a worker server reads (1 MiB). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** The most body bytes a worker server holds per client address before their digest is checked. */
export const MAX_UNVERIFIED_BYTES = 16 * MAX_BODY_BYTES;

/**
 * The verified body's text and the signing it came with (its answer is signed over the nonce);
 * or the refusal (whose answer closes the connection: B1, B3), with the signing when the headers
 * were authentic (so that refusal is signed too).
 */
export type BodyRead =
  | { ok: true; text: string; signing: RequestSigning }
  | { ok: false; error: LoomError; signing?: RequestSigning };

/** The bytes a server holds of bodies whose digest is not checked yet, per client address (B3). */
export class UnverifiedBytes {
  private readonly byAddress = new Map<string, number>();

  constructor(readonly maxBytes: number) {}

  /** Bytes held now, across every address. */
  get held(): number {
    let sum = 0;
    for (const bytes of this.byAddress.values()) sum += bytes;
    return sum;
  }

  /** Takes `bytes` from `address`'s allowance, or returns false (taking nothing) when they do not fit. */
  take(address: string, bytes: number): boolean {
    const held = this.byAddress.get(address) ?? 0;
    if (held + bytes > this.maxBytes) return false;
    this.byAddress.set(address, held + bytes);
    return true;
  }

  give(address: string, bytes: number): void {
    const left = (this.byAddress.get(address) ?? 0) - bytes;
    if (left > 0) this.byAddress.set(address, left);
    else this.byAddress.delete(address);
  }
}

export interface BodyLimits {
  secret: string;
  /** The worker id requests must be signed for (A5). */
  audience: () => string;
  nonces: NonceLedger;
  maxBodyBytes: number;
  unverified: UnverifiedBytes;
}

/**
 * The request's body text once it is known to be authentic (A1, B5), within `maxBodyBytes`, and
 * UTF-8; otherwise the refusal: UnauthenticatedError, PayloadTooLargeError, a WorkerRefusedError
 * when the client's address holds too much unchecked already, InvalidInputError. An
 * unauthenticated caller learns nothing beyond the 401.
 */
export function readSignedBody(req: IncomingMessage, limits: BodyLimits): Promise<BodyRead> {
  const nowMs = Date.now();
  const signing = verifiedSigning(
    limits.secret,
    limits.audience(),
    { method: req.method ?? "", path: req.url ?? "", headers: req.headers },
    nowMs,
  );
  if (signing === undefined) return Promise.resolve(refused(unauthenticated()));
  // A3: taken before the body is read, so a replay is refused from its headers too.
  if (!limits.nonces.take(signing.nonce, Number(signing.timestamp), nowMs)) {
    return Promise.resolve(refused(unauthenticated()));
  }
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limits.maxBodyBytes) {
    return Promise.resolve(refused(tooLarge(declared, limits.maxBodyBytes), signing));
  }
  return readBody(req, limits, signing);
}

/** Reads the body of an authentic request, within the address's allowance (B2, B3, B5). */
function readBody(
  req: IncomingMessage,
  limits: BodyLimits,
  signing: RequestSigning,
): Promise<BodyRead> {
  const address = req.socket.remoteAddress ?? "";
  const hash = createHash("sha256");
  return new Promise<BodyRead>((resolve) => {
    const kept: Buffer[] = [];
    let bytes = 0;
    let held = 0;
    const settle = (read: BodyRead) => {
      req.off("data", onData).off("end", onEnd).off("error", onBroken).off("close", onBroken);
      limits.unverified.give(address, held);
      held = 0;
      kept.length = 0;
      resolve(read);
    };
    const onData = (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
      if (bytes > limits.maxBodyBytes) {
        // B2: hashed, not kept; what was kept is given back.
        limits.unverified.give(address, held);
        held = 0;
        kept.length = 0;
      } else if (limits.unverified.take(address, chunk.length)) {
        held += chunk.length;
        kept.push(chunk);
      } else {
        settle(refused(busy(limits.unverified.maxBytes), signing));
      }
    };
    const onEnd = () => {
      if (hash.digest("hex") !== signing.digest) return settle(refused(unauthenticated()));
      if (bytes > limits.maxBodyBytes) {
        return settle(refused(tooLarge(bytes, limits.maxBodyBytes), signing));
      }
      let text: string;
      try {
        text = utf8.decode(Buffer.concat(kept));
      } catch {
        const error = new InvalidInputError("the request body is not valid UTF-8");
        return settle(refused(error, signing));
      }
      settle({ ok: true, text, signing });
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

function refused(error: LoomError, signing?: RequestSigning): BodyRead {
  return signing ? { ok: false, error, signing } : { ok: false, error };
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
    `the worker holds ${maxBytes} bytes of this address's request bodies not yet checked; try again shortly`,
    { maxUnverifiedBytes: maxBytes },
  );
}
