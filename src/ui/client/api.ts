/**
 * The client's side of the JSON API (api-types.ts): a GET or POST that answers the typed body,
 * or throws an ApiError carrying the `{ error: { code, message } }` the server answered
 * (http.ts H1), which the page shows as it came.
 */
import { h } from "./dom.ts";

export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function errorOf(status: number, statusText: string, body: unknown): ApiError {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (error && typeof error.code === "string" && typeof error.message === "string") {
    return new ApiError(status, error.code, error.message);
  }
  return new ApiError(status, `HTTP_${status}`, statusText || "the server answered no JSON");
}

export async function api<T>(path: string, init?: RequestInit): Promise<T> {
  const res = await fetch(path, { headers: { Accept: "application/json" }, ...init });
  let body: unknown = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  if (!res.ok) throw errorOf(res.status, res.statusText, body);
  return body as T;
}

export function post<T>(path: string, body: unknown): Promise<T> {
  return api<T>(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body),
  });
}

export const apiPath = (id: string): string => `/api/executions/${encodeURIComponent(id)}`;
export const execHref = (id: string): string => `#/x/${encodeURIComponent(id)}`;

/** An error's words: `CODE: message` for an API error. */
export function errorText(err: unknown): string {
  if (err instanceof ApiError) return `${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

export function errorBox(err: unknown): HTMLElement {
  return h("div", { class: "error-box", role: "alert", "data-testid": "error" }, errorText(err));
}
