/**
 * One signed request to a worker server, with a timeout: it answers, or fails with a typed error,
 * and never hangs.
 *
 * - no connection, a broken one, a certificate it does not trust, or no whole answer within
 *   `timeoutMs`: WorkerUnreachableError;
 * - an answer that is not a worker's JSON, one over MAX_ANSWER_BYTES, one not signed for this
 *   request, or a refusal (401, 503, ...): WorkerRefusedError;
 * - a 500 with the worker's error: WorkerFailedError (wire.ts);
 * - a request error (400, 404, 409, ...): the Loom error the worker raised (wire.ts).
 *
 * Invariants (tests cite C1..C2):
 * C1. No answer is taken unless it is signed over this request's nonce (signing.ts A6): an
 *     unsigned or forged answer, whatever its status, is a WorkerRefusedError, never a start
 *     accepted nor an error of the worker's.
 * C2. An `https:` worker is reached over TLS, trusting the system's authorities or, when given,
 *     `ca` alone (a self-signed or private authority's certificate, PEM).
 *
 * Requests are signed with wall time (signing.ts A4).
 */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import {
  InvalidInputError,
  WorkerRefusedError,
  WorkerUnreachableError,
  ensureError,
} from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { NONCE_HEADER, SIGNATURE_HEADER, answerIsSigned, signedHeaders } from "./signing.ts";
import { errorOfAnswer } from "./wire.ts";

export interface WorkerTarget {
  /** The worker server's origin, e.g. `http://10.0.0.7:7070`. */
  url: URL;
  secret: string;
  /** The worker id requests are signed for (signing.ts A5). */
  audience: string;
  timeoutMs: number;
  /** The certificate authority (PEM) an https worker's certificate must chain to (C2). */
  ca?: string | Buffer;
}

/** The largest answer read from a worker: its answers are a few hundred bytes. */
export const MAX_ANSWER_BYTES = 64 * 1024;

/** A worker server's URL: http or https, with no path of its own (its endpoints are at `/`). */
export function checkedWorkerUrl(url: unknown): URL {
  let parsed: URL;
  try {
    parsed = new URL(String(url));
  } catch {
    throw new InvalidInputError(`a worker URL must be a URL, got ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new InvalidInputError(`a worker URL must be http or https, got ${parsed.protocol}`);
  }
  if ((parsed.pathname !== "/" && parsed.pathname !== "") || parsed.search || parsed.hash) {
    throw new InvalidInputError(
      `a worker URL is the server's origin, with no path or query: ${parsed.href}`,
    );
  }
  return parsed;
}

/** Sends one signed request and resolves with the JSON of its 2xx answer (C1). */
export async function callWorker(
  target: WorkerTarget,
  method: "GET" | "POST",
  path: string,
  body?: Json,
): Promise<unknown> {
  const text = body === undefined ? "" : JSON.stringify(body);
  const url = new URL(path, target.url);
  const where = { url: target.url.origin, path };
  const headers: Record<string, string> = signedHeaders(target.secret, {
    method,
    path: url.pathname + url.search,
    body: text,
    audience: target.audience,
  });
  if (body !== undefined) headers["content-type"] = "application/json";
  let answer: RawAnswer;
  try {
    answer = await exchange(target, url, method, headers, text);
  } catch (e) {
    throw new WorkerUnreachableError(
      `worker ${where.url} is unreachable (${path}): ${causeOf(ensureError(e))}`,
      { url: where.url, path },
    );
  }
  const { status } = answer;
  if (answer.text === undefined) {
    throw new WorkerRefusedError(
      `worker ${where.url} answered ${path} with status ${status} and more than ${MAX_ANSWER_BYTES} bytes`,
      { url: where.url, path, status },
    );
  }
  const signed = { audience: target.audience, nonce: headers[NONCE_HEADER] ?? "", status };
  if (!answerIsSigned(target.secret, { ...signed, body: answer.text }, answer.signature)) {
    throw new WorkerRefusedError(
      `worker ${where.url} answered ${path} with status ${status} and no valid signature`,
      { url: where.url, path, status },
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.text) as unknown;
  } catch {
    throw new WorkerRefusedError(
      `worker ${where.url} answered ${path} with status ${status} and a body that is not JSON`,
      { url: where.url, path, status },
    );
  }
  if (status >= 200 && status < 300) return parsed;
  throw errorOfAnswer({ status, body: parsed }, where);
}

/** An answer as it came: its text is undefined when it was over MAX_ANSWER_BYTES. */
interface RawAnswer {
  status: number;
  signature: unknown;
  text: string | undefined;
}

/** One HTTP(S) exchange, cut at `timeoutMs` (C2: `ca` alone is trusted when given). */
function exchange(
  target: WorkerTarget,
  url: URL,
  method: string,
  headers: Record<string, string>,
  text: string,
): Promise<RawAnswer> {
  return new Promise<RawAnswer>((resolve, reject) => {
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(url, {
      method,
      headers: { ...headers, "content-length": String(Buffer.byteLength(text)) },
      ...(target.ca === undefined ? {} : { ca: target.ca }),
    });
    const timer = setTimeout(
      () => req.destroy(new Error(`no answer within ${target.timeoutMs} ms`)),
      target.timeoutMs,
    );
    const fail = (e: Error) => {
      clearTimeout(timer);
      reject(e);
    };
    req.on("error", fail);
    req.on("response", (res) => {
      boundedText(res, MAX_ANSWER_BYTES).then((answerText) => {
        clearTimeout(timer);
        resolve({
          status: res.statusCode ?? 0,
          signature: res.headers[SIGNATURE_HEADER],
          text: answerText,
        });
      }, fail);
    });
    req.end(text);
  });
}

/** The answer's text, or undefined (its body dropped unread) once it is over `maxBytes`. */
function boundedText(res: IncomingMessage, maxBytes: number): Promise<string | undefined> {
  return new Promise<string | undefined>((resolve, reject) => {
    if (Number(res.headers["content-length"] ?? 0) > maxBytes) {
      res.destroy();
      return resolve(undefined);
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    res.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        res.destroy();
        resolve(undefined);
      } else chunks.push(chunk);
    });
    res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    res.on("error", reject);
    res.on("close", () => {
      if (!res.complete) reject(new Error("the answer broke off before it ended"));
    });
  });
}

/** The most telling message of a failure (some put the socket's error in `cause`). */
function causeOf(e: Error): string {
  const cause = (e as { cause?: unknown }).cause;
  return cause instanceof Error ? `${e.message}: ${cause.message}` : e.message;
}
