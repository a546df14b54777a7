/**
 * How errors cross the HTTP seam: as data (`{ error: { name, code, message, details? } }`, STYLE
 * 5), with an HTTP status chosen by what the error says about the request.
 *
 * A status that blames the request (400, 403, 404, 409, 413) comes back to the client as the
 * Loom error the worker raised, so a caller sees the same ExecutionConflictError from a remote
 * worker as from a local one. A 500 carrying the worker's error is a WorkerFailedError: the
 * worker took the request and failed on it, which another worker would most likely do too. Any
 * other answer (401, 405, 503, a 5xx or anything else that is not a worker's JSON error) is a
 * WorkerRefusedError: the worker would not take the request, another one may.
 */
import {
  WorkerFailedError,
  WorkerRefusedError,
  errorFromData,
  errorToData,
  isLoomError,
  readErrorData,
  type ErrorData,
  type LoomError,
} from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";

const STATUS_OF_CODE: Record<string, number> = {
  LOOM_INVALID_INPUT: 400,
  LOOM_INVALID_ID: 400,
  LOOM_RESERVED_SUCCESSOR_ID: 400,
  LOOM_UNAUTHENTICATED: 401,
  LOOM_UNAUTHORIZED: 403,
  LOOM_UNKNOWN_FLOW: 404,
  LOOM_NOT_FOUND: 404,
  LOOM_EXECUTION_CONFLICT: 409,
  LOOM_CHAIN_HOP_LIMIT: 409,
  LOOM_PAYLOAD_TOO_LARGE: 413,
  LOOM_LEASE_HELD: 503,
  LOOM_RUNTIME_CLOSED: 503,
  LOOM_WORKER_REFUSED: 503,
};

/** Statuses whose error is about the request itself, rebuilt on the client as it was raised. */
const REQUEST_ERRORS = new Set([400, 403, 404, 409, 413]);

/** The HTTP status a worker server answers an error with (500 for anything unforeseen). */
export function statusOf(error: unknown): number {
  if (!isLoomError(error)) return 500;
  return STATUS_OF_CODE[error.code] ?? 500;
}

/** The JSON body that carries an error. */
export function errorBody(error: unknown): { error: Json } {
  return { error: errorToData(error) as unknown as Json };
}

/**
 * The error a client raises for a worker's non-2xx answer: the worker's own Loom error for a
 * request error, else a WorkerRefusedError naming the status.
 */
export function errorOfAnswer(
  answer: { status: number; body: unknown },
  where: { url: string; path: string },
): LoomError {
  const raised = errorDataOf(answer.body);
  if (raised && REQUEST_ERRORS.has(answer.status)) return errorFromData(raised);
  const why = raised ? `${raised.code} ${raised.message}` : "no error in its answer";
  const details: { [key: string]: Json } = { url: where.url, status: answer.status };
  if (raised) details.error = raised as unknown as Json;
  if (raised && answer.status === 500) {
    return new WorkerFailedError(
      `worker ${where.url} failed on ${where.path} (status 500): ${why}`,
      details,
    );
  }
  return new WorkerRefusedError(
    `worker ${where.url} refused ${where.path} with status ${answer.status}: ${why}`,
    details,
  );
}

function errorDataOf(body: unknown): ErrorData | undefined {
  if (body === null || typeof body !== "object") return undefined;
  const data = readErrorData((body as { error?: unknown }).error, "LOOM_APPLICATION");
  return data && isLoomError(data) ? data : undefined;
}
