/**
 * What a provider's 429 asks of the fleet (rate-limits.ts RL5): how long to block the limiter,
 * read from the provider's retry hints.
 *
 * RH1. `rateLimitedFor` answers undefined for anything but an error with `status` 429, else the
 *      hint's time: `retry-after-ms`, `retry-after` in seconds or as a date, OpenAI's
 *      `x-ratelimit-reset-*` durations (the longest), Anthropic's reset times (the latest), else
 *      BLOCK_WITHOUT_HINT_MS; in whole milliseconds rounded up, from 0 to MAX_BLOCK_MS. (A
 *      fractional or huge hint gave a time the store refused as no safe integer: the refusal
 *      was only reported, and nothing blocked the fleet.)
 */
const BLOCK_WITHOUT_HINT_MS = 1000;
/** RH1: the longest a provider's hint blocks a limiter (a day; a larger hint is a broken one). */
export const MAX_BLOCK_MS = 24 * 3_600_000;

/** RH1: how long a provider's 429 asks the fleet to back off, or undefined for another error. */
export function rateLimitedFor(error: unknown): number | undefined {
  const ms = retryHintMs(error);
  return ms === undefined ? undefined : Math.min(MAX_BLOCK_MS, Math.ceil(ms));
}

function retryHintMs(error: unknown): number | undefined {
  if (error === null || typeof error !== "object") return undefined;
  const e = error as { status?: unknown; headers?: unknown };
  if (e.status !== 429) return undefined;
  const header = headerReader(e.headers);
  const ms = header("retry-after-ms");
  if (ms !== undefined && Number.isFinite(Number(ms))) return Math.max(0, Number(ms));
  const after = header("retry-after");
  if (after !== undefined) {
    const seconds = Number(after);
    if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
    const date = Date.parse(after);
    if (Number.isFinite(date)) return Math.max(0, date - Date.now());
  }
  const resets = ["x-ratelimit-reset-tokens", "x-ratelimit-reset-requests"]
    .map((h) => durationMs(header(h)))
    .filter((v): v is number => v !== undefined);
  for (const kind of ["requests", "tokens", "input-tokens", "output-tokens"]) {
    const at = Date.parse(header(`anthropic-ratelimit-${kind}-reset`) ?? "");
    if (Number.isFinite(at)) resets.push(Math.max(0, at - Date.now()));
  }
  if (resets.length > 0) return Math.max(...resets);
  return BLOCK_WITHOUT_HINT_MS;
}

function headerReader(headers: unknown): (name: string) => string | undefined {
  if (headers === null || typeof headers !== "object") return () => undefined;
  const h = headers as { get?: unknown } & Record<string, unknown>;
  if (typeof h.get === "function") {
    const get = h.get as (this: unknown, name: string) => unknown;
    return (name) => {
      const v = get.call(headers, name);
      return typeof v === "string" ? v : undefined;
    };
  }
  return (name) => {
    const v = h[name];
    return typeof v === "string" ? v : undefined;
  };
}

/** OpenAI's reset durations: `1s`, `6m0s`, `12ms`, `1h2m3.5s`. */
function durationMs(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/gu)];
  if (parts.length === 0) return undefined;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  return parts.reduce((sum, [, n, u]) => sum + Number(n) * (unit[u ?? "ms"] ?? 1), 0);
}
