/**
 * One signed request to a worker server, with a timeout: it answers, or fails with a typed error,
 * and never hangs.
 *
 * - no connection, a broken one, or no whole answer within `timeoutMs`: WorkerUnreachableError;
 * - an answer that is not a worker's JSON, one over MAX_ANSWER_BYTES, or a refusal (401, 503,
 *   ...): WorkerRefusedError;
 * - a 500 with the worker's error: WorkerFailedError (wire.ts);
 * - a request error (400, 404, 409, ...): the Loom error the worker raised (wire.ts).
 *
 * Requests are signed with wall time (signing.ts A4).
 */
import {
  InvalidInputError,
  WorkerRefusedError,
  WorkerUnreachableError,
  ensureError,
} from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import { signedHeaders } from "./signing.ts";
import { errorOfAnswer } from "./wire.ts";

export interface WorkerTarget {
  /** The worker server's origin, e.g. `http://10.0.0.7:7070`. */
  url: URL;
  secret: string;
  timeoutMs: number;
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

/** Sends one signed request and resolves with the JSON of its 2xx answer. */
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
  });
  if (body !== undefined) headers["content-type"] = "application/json";
  const signal = AbortSignal.timeout(target.timeoutMs);
  let status: number;
  let answer: string | undefined;
  try {
    const res = await fetch(url, {
      method,
      headers,
      signal,
      redirect: "manual",
      ...(body === undefined ? {} : { body: text }),
    });
    status = res.status;
    answer = await boundedText(res, MAX_ANSWER_BYTES);
  } catch (e) {
    const why = signal.aborted
      ? `no answer within ${target.timeoutMs} ms`
      : causeOf(ensureError(e));
    throw new WorkerUnreachableError(`worker ${where.url} is unreachable (${path}): ${why}`, {
      url: where.url,
      path,
    });
  }
  if (answer === undefined) {
    throw new WorkerRefusedError(
      `worker ${where.url} answered ${path} with status ${status} and more than ${MAX_ANSWER_BYTES} bytes`,
      { url: where.url, path, status },
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer) as unknown;
  } catch {
    throw new WorkerRefusedError(
      `worker ${where.url} answered ${path} with status ${status} and a body that is not JSON`,
      { url: where.url, path, status },
    );
  }
  if (status >= 200 && status < 300) return parsed;
  throw errorOfAnswer({ status, body: parsed }, where);
}

/** The answer's text, or undefined (its body dropped unread) once it is over `maxBytes`. */
async function boundedText(res: Response, maxBytes: number): Promise<string | undefined> {
  if (Number(res.headers.get("content-length") ?? 0) > maxBytes) {
    await res.body?.cancel();
    return undefined;
  }
  if (!res.body) return "";
  const reader: ReadableStreamDefaultReader<Uint8Array> = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    bytes += read.value.byteLength;
    if (bytes > maxBytes) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(read.value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The most telling message of a fetch failure (undici puts the socket's error in `cause`). */
function causeOf(e: Error): string {
  const cause = (e as { cause?: unknown }).cause;
  return cause instanceof Error ? `${e.message}: ${cause.message}` : e.message;
}
