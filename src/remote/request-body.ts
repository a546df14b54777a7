/**
 * Reads a worker server request's body: bounded in memory, verified as it streams (signing.ts),
 * and decoded as UTF-8 JSON text.
 *
 * The body is always read to its end before anything is answered, so a client still sending
 * gets its answer instead of a reset connection; bytes past the limit are hashed and dropped,
 * and the server's request timeout bounds how long a sender can keep one going.
 */
import type { IncomingMessage } from "node:http";
import {
  InvalidInputError,
  PayloadTooLargeError,
  UnauthenticatedError,
  type LoomError,
} from "../kernel/errors.ts";
import { SIGNATURE_HEADER, SignatureCheck, TIMESTAMP_HEADER } from "./signing.ts";

/** The largest body a worker server reads (1 MiB). */
export const MAX_BODY_BYTES = 1024 * 1024;

export type BodyRead = { ok: true; text: string } | { ok: false; error: LoomError };

/**
 * The request's body text once it is known to be authentic (A1), within `maxBodyBytes`, and
 * UTF-8; otherwise the refusal, in that order: UnauthenticatedError, PayloadTooLargeError,
 * InvalidInputError. An unauthenticated caller learns nothing beyond the 401.
 */
export async function readSignedBody(
  req: IncomingMessage,
  options: { secret: string; nowMs: () => number; maxBodyBytes: number },
): Promise<BodyRead> {
  const check = new SignatureCheck(options.secret, {
    method: req.method ?? "",
    path: req.url ?? "",
    timestamp: req.headers[TIMESTAMP_HEADER],
    signature: req.headers[SIGNATURE_HEADER],
  });
  const kept: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    check.update(buffer);
    bytes += buffer.length;
    if (bytes <= options.maxBodyBytes) kept.push(buffer);
    else kept.length = 0;
  }
  const refused = check.verdict(options.nowMs());
  if (refused !== undefined) return { ok: false, error: new UnauthenticatedError(refused) };
  if (bytes > options.maxBodyBytes) {
    return {
      ok: false,
      error: new PayloadTooLargeError(
        `the request body is ${bytes} bytes, over the limit of ${options.maxBodyBytes}`,
        { bytes, maxBytes: options.maxBodyBytes },
      ),
    };
  }
  try {
    return { ok: true, text: utf8.decode(Buffer.concat(kept)) };
  } catch {
    return { ok: false, error: new InvalidInputError("the request body is not valid UTF-8") };
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The JSON value of a body's text; InvalidInputError (a 400) when it is not JSON. */
export function parseBody(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    throw new InvalidInputError(`the request body is not valid JSON (${reason})`);
  }
}
