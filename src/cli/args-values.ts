/**
 * The values a command line's flags and arguments carry, each checked on its own: a JSON text, a
 * port, a count, a subject, the database to open. Each refuses a bad value with a UsageError that
 * names the flag and quotes what it was given.
 */
import { EXECUTION_STATUSES, type ExecutionStatus } from "../kernel/events.ts";
import { DEFAULT_PG_SCHEMA } from "./args-command.ts";
import { SIGNATURES } from "./args-flags.ts";
import { UsageError } from "./cli-error.ts";

/** A data subject id, as the runtime takes it (1 to 200 characters). */
export function parseSubject(text: string): string {
  if (text === "" || text.length > 200) {
    throw new UsageError(
      `a subject must be 1 to 200 characters, got ${brief(JSON.stringify(text))}`,
    );
  }
  return text;
}

export function parseMaxActive(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const maxActive = Number(text);
  if (!Number.isSafeInteger(maxActive) || maxActive < 1) {
    throw new UsageError(`--max-active needs a whole number >= 1, got ${JSON.stringify(text)}`);
  }
  return maxActive;
}

export function parsePort(text: string | undefined, command: "serve" | "ui"): number {
  if (text === undefined) {
    throw new UsageError(`loom ${command} needs --port N (${SIGNATURES[command]})`);
  }
  const port = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(port) || port > 65535) {
    throw new UsageError(
      `--port needs a port number from 0 to 65535 (0: any free port), got ${JSON.stringify(text)}`,
    );
  }
  return port;
}

/** The secret itself never appears on a command line (it would show in `ps`): only its name. */
export function parseEnvName(text: string | undefined): string {
  if (text === undefined) {
    throw new UsageError(`loom serve needs --secret-env NAME (${SIGNATURES.serve})`);
  }
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(text)) {
    throw new UsageError(
      `--secret-env needs the name of an environment variable, got ${JSON.stringify(text)}`,
    );
  }
  return text;
}

/** `--limit N`: a whole number >= 1. */
export function parseCount(text: string, flag: string): number {
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`${flag} needs a whole number >= 1, got ${JSON.stringify(text)}`);
  }
  return n;
}

/** A fork point: a sequence number of the log (0 is its EXECUTION_STARTED). */
export function parseSequence(text: string): number {
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n)) {
    throw new UsageError(
      `the fork point needs a sequence number >= 0 (loom show lists them), got ${JSON.stringify(text)}`,
    );
  }
  return n;
}

export function nonEmpty(text: string, flag: string, what: string): string {
  if (text === "") throw new UsageError(`${flag} needs ${what}`);
  return text;
}

export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    throw new UsageError(`${what} is not valid JSON (${reason}): ${brief(text)}`);
  }
}

export function parseStatuses(text: string): ExecutionStatus[] {
  const wanted = text.split(",").map((s) => s.trim());
  for (const s of wanted) {
    if (!(EXECUTION_STATUSES as readonly string[]).includes(s)) {
      throw new UsageError(
        `unknown status ${JSON.stringify(s)} in --status (one or more of ${EXECUTION_STATUSES.join(",")})`,
      );
    }
  }
  return [...new Set(wanted)] as ExecutionStatus[];
}

function brief(text: string): string {
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

/** `--pg URL [--pg-schema NAME]`, refused beside `--db` (one database per command). */
export function whereOnPostgres(
  db: string | undefined,
  url: string | undefined,
  schema: string | undefined,
): { pg?: { url: string; schema: string } } {
  if (url === undefined) {
    if (schema !== undefined) throw new UsageError("--pg-schema needs --pg URL");
    return {};
  }
  if (db !== undefined) throw new UsageError("--db and --pg name two databases: pass one");
  if (!/^postgres(ql)?:\/\//.test(url)) {
    throw new UsageError(`--pg needs a postgres:// URL, got ${JSON.stringify(url)}`);
  }
  const name = schema ?? DEFAULT_PG_SCHEMA;
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) {
    throw new UsageError(`--pg-schema must be a plain SQL identifier, got ${JSON.stringify(name)}`);
  }
  return { pg: { url, schema: name } };
}
