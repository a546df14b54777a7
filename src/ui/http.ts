/**
 * The dashboard's HTTP plumbing: JSON answers, errors as data with the status their code implies,
 * and request bodies read as bounded JSON.
 *
 * Invariants (tests cite H1..H4):
 * H1. Every error is answered `{ error: { code, message } }`: a Loom error with its own code
 *     and the status the code implies (400, 403, 404, 409, 413, 503), anything else 500; a
 *     401 (no token, auth.ts A1) also names the scheme in `WWW-Authenticate`.
 * H2. A POST body must be declared `application/json` (415 otherwise: a cross-site form cannot
 *     send one without a CORS preflight, which this server never grants), at most 1 MiB (413,
 *     from Content-Length before a byte is read, or counted while it streams, nothing past the
 *     limit kept), UTF-8 and JSON (400). An empty body is `{}`.
 * H3. Every answer carries the security headers: a strict Content-Security-Policy (same-origin
 *     scripts, styles and connections only; no framing), nosniff, no referrer. No CORS headers.
 * H4. API answers are never cached.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { isLoomError } from "../kernel/errors.ts";

/** The largest request body read (1 MiB). */
export const MAX_BODY_BYTES = 1024 * 1024;

/** A refusal of the request itself, with its status and a stable code. */
export class HttpRefusal extends Error {
  override readonly name = "HttpRefusal";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const STATUS_OF_CODE: Record<string, number> = {
  LOOM_INVALID_INPUT: 400,
  LOOM_INVALID_ID: 400,
  LOOM_RESERVED_SUCCESSOR_ID: 400,
  LOOM_UNAUTHORIZED: 403,
  // Sealed with a key this dashboard's runtime does not have: its content is not shown.
  LOOM_CODEC_KEY: 403,
  LOOM_NOT_FOUND: 404,
  LOOM_UNKNOWN_FLOW: 404,
  LOOM_NOT_RESUMABLE: 409,
  LOOM_EXECUTION_CONFLICT: 409,
  LOOM_EXECUTION_ENDED: 409,
  LOOM_CHAIN_HOP_LIMIT: 409,
  LOOM_LEASE_HELD: 409,
  LOOM_FENCED: 409,
  LOOM_SEQUENCE_CONFLICT: 409,
  LOOM_FORK_PAST_CONTINUATION: 409,
  LOOM_COMPACTED_FORK_POINT: 409,
  LOOM_PAYLOAD_TOO_LARGE: 413,
  LOOM_RUNTIME_CLOSED: 503,
};

/** H3 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "Content-Security-Policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "X-Frame-Options": "DENY",
};

/** The status and data an error is answered with (H1). */
export function errorAnswer(e: unknown): { status: number; body: { error: ErrorBody } } {
  if (e instanceof HttpRefusal) {
    return { status: e.status, body: { error: { code: e.code, message: e.message } } };
  }
  if (isLoomError(e)) {
    const status = STATUS_OF_CODE[e.code] ?? 500;
    return { status, body: { error: { code: e.code, message: e.message } } };
  }
  const message = e instanceof Error ? e.message : String(e);
  return { status: 500, body: { error: { code: "LOOM_INTERNAL", message } } };
}

export interface ErrorBody {
  code: string;
  message: string;
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": Buffer.byteLength(text),
    "Cache-Control": "no-store",
  });
  res.end(text);
}

export function sendError(res: ServerResponse, e: unknown): void {
  const { status, body } = errorAnswer(e);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // A refused body may still be arriving: the connection goes, not the rest of it.
  if (status === 413) res.setHeader("Connection", "close");
  if (status === 401) res.setHeader("WWW-Authenticate", 'Bearer realm="loom ui"');
  sendJson(res, status, body);
}

/** Static text (the page and its assets), cached by nobody: it changes with the package. */
export function sendText(res: ServerResponse, contentType: string, text: string): void {
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    "Content-Type": `${contentType}; charset=utf-8`,
    "Content-Length": Buffer.byteLength(text),
    "Cache-Control": "no-cache",
  });
  res.end(text);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The JSON value of a POST body (H2); throws an HttpRefusal. */
export async function readJsonBody(
  req: IncomingMessage,
  maxBytes = MAX_BODY_BYTES,
): Promise<unknown> {
  const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/json") {
    throw new HttpRefusal(
      415,
      "LOOM_UNSUPPORTED_MEDIA_TYPE",
      "the request body must be JSON, sent with Content-Type: application/json",
    );
  }
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > maxBytes) throw tooLarge(declared, maxBytes);
  const kept: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes <= maxBytes) kept.push(chunk);
    else kept.length = 0;
  }
  if (bytes > maxBytes) throw tooLarge(bytes, maxBytes);
  let text: string;
  try {
    text = utf8.decode(Buffer.concat(kept));
  } catch {
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", "the request body is not valid UTF-8");
  }
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new HttpRefusal(400, "LOOM_INVALID_INPUT", `the request body is not JSON (${why})`);
  }
}

function tooLarge(bytes: number, maxBytes: number): HttpRefusal {
  return new HttpRefusal(
    413,
    "LOOM_PAYLOAD_TOO_LARGE",
    `the request body is ${bytes} bytes, over the limit of ${maxBytes}`,
  );
}
