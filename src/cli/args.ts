/**
 * The command line, parsed into one typed command.
 *
 * Everything a command line alone can get wrong (an unknown command or flag, a missing argument,
 * JSON that does not parse, an unknown status) is a `UsageError` raised here, before any module
 * is loaded or any database opened.
 */
import { parseArgs } from "node:util";
import { EXECUTION_STATUSES, type ExecutionStatus } from "../kernel/events.ts";
import { UsageError } from "./cli-error.ts";

export const DEFAULT_DB = "./loom.db";
export const DEFAULT_PG_SCHEMA = "loom";
/** `loom ui`'s port when `--port` is not given. */
export const DEFAULT_UI_PORT = 7070;

export const USAGE = `usage: loom <command> [arguments] [--db PATH | --pg URL [--pg-schema NAME]]

commands:
  init [dir]             write a new project that uses Loom as an npm package into dir
                         (default: the working directory); refuses if a file it writes exists
  run <module> <flow> [--input JSON] [--id ID] [--subject ID] [--quiet]
                         start a flow of <module> and wait for its outcome (printed as JSON on
                         stdout; each step on stderr as it ends, unless --quiet);
                         --subject names the data subject whose data it holds
  worker <module> [--max-active N]
                         drive the module's flows and recover abandoned executions
                         (at most N at once) until SIGINT or SIGTERM
  ls [--status S[,S]] [--flow NAME] [--limit N] [--after ID] [--json]
                         list executions by id, optionally only those with these statuses or
                         of this flow; --limit N and --after ID page through them
  show <id> [--json]     an execution's folded state and the timeline of its log
  resume <id> [JSON]     answer an execution's suspend with a JSON payload
  send <id> <JSON> [--topic T] [--key K]
                         post a message to the inbox of the execution's chain (ctx.receive);
                         --key makes a retry a no-op
  fork <id> <seq> [--id NEW] [--module M [--quiet]]
                         copy an execution's log up to sequence <seq> into a new execution and
                         print its id; a worker drives it on, or with --module this command
                         does, and prints its outcome like run
  serve <module> --port N --secret-env NAME [--host H] [--max-active N]
                         drive the module's flows like worker, and serve them over HTTP
                         (POST /dispatch, POST /cancel, GET /health; requests signed with
                         the secret in environment variable NAME); prints its URL
  cancel <id> [--reason TEXT]
                         cancel an execution; its owner aborts what is in flight
  schedules [--json]     the cron schedules, with each one's next occurrence
  verify <id> [--json]   check an execution's audit chain (exit 1 when it was tampered with)
  erase-subject <subject> --yes [--json]
                         make a data subject's payloads unrecoverable: cancel its live
                         executions, record the erasure, destroy its key (irreversible)
  ui [--port N] [--host H] [--allow-host NAME[,NAME]]
                         serve the web UI on http://H:N (default 127.0.0.1:${DEFAULT_UI_PORT}; 0: any
                         free port) until SIGINT or SIGTERM; prints its URL

options:
  --db PATH              the SQLite database (default ${DEFAULT_DB})
  --pg URL               a PostgreSQL database instead (a fleet shares one: every process
                         given the same URL and schema sees and drives the same executions)
  --pg-schema NAME       the schema Loom's tables live in (default ${DEFAULT_PG_SCHEMA})
  -h, --help             print this help

environment (every command, and every process sharing the database, needs the same):
  LOOM_CODEC_KEYS        seal payloads: comma-separated id:key pairs, each key 32 bytes as
                         64 hex characters or base64 (e.g. k1:<hex>,k2:<hex>)
  LOOM_CODEC_KEY_ID      the key new payloads are sealed with (default: the last pair's)
  LOOM_AUDIT=1           stamp the audit chain on every event (SHA-256)
  LOOM_AUDIT_KEY         stamp a keyed audit chain (HMAC-SHA-256 with this text)
  LOOM_FEATURES          fleet-wide feature flags (continueAsNew)

statuses: ${EXECUTION_STATUSES.join(", ")}
exit codes: 0 success, 1 error or failed flow, 2 usage error
docs: docs/cli.md`;

interface Common {
  /** As given on the command line; resolved against the working directory when opened. */
  db: string;
  /** A PostgreSQL database instead of the SQLite file (`--pg`, `--pg-schema`). */
  pg?: { url: string; schema: string };
}

export type Command =
  | { name: "help" }
  /** Takes no database: it writes a project scaffold into `dir`. */
  | { name: "init"; dir: string }
  | (Common & {
      name: "run";
      module: string;
      flow: string;
      input: unknown;
      id?: string;
      subject?: string;
      /** No progress lines on stderr. */
      quiet: boolean;
    })
  | (Common & { name: "worker"; module: string; maxActive?: number })
  | (Common & {
      name: "serve";
      module: string;
      port: number;
      host: string;
      secretEnv: string;
      maxActive?: number;
    })
  | (Common & {
      name: "ls";
      status?: ExecutionStatus[];
      flow?: string;
      limit?: number;
      /** Only ids after this one (paging). */
      after?: string;
      json: boolean;
    })
  | (Common & { name: "show"; id: string; json: boolean })
  | (Common & { name: "resume"; id: string; payload: unknown })
  | (Common & { name: "cancel"; id: string; reason?: string })
  | (Common & { name: "schedules"; json: boolean })
  | (Common & { name: "verify"; id: string; json: boolean })
  | (Common & { name: "erase-subject"; subject: string; json: boolean })
  | (Common & { name: "send"; id: string; message: unknown; topic?: string; key?: string })
  | (Common & {
      name: "fork";
      id: string;
      atSequence: number;
      newId?: string;
      /** Drive the fork here, with this module's flows, and print its outcome. */
      module?: string;
      quiet: boolean;
    })
  | (Common & { name: "ui"; port: number; host: string; allowHosts: string[] });

type OptionName =
  | "db"
  | "pg"
  | "pg-schema"
  | "input"
  | "id"
  | "status"
  | "json"
  | "max-active"
  | "reason"
  | "port"
  | "host"
  | "allow-host"
  | "secret-env"
  | "subject"
  | "yes"
  | "quiet"
  | "flow"
  | "limit"
  | "after"
  | "topic"
  | "key"
  | "module";

const ALLOWED: Record<string, { positionals: [number, number]; options: OptionName[] }> = {
  init: { positionals: [0, 1], options: [] },
  run: {
    positionals: [2, 2],
    options: ["db", "pg", "pg-schema", "input", "id", "subject", "quiet"],
  },
  worker: { positionals: [1, 1], options: ["db", "pg", "pg-schema", "max-active"] },
  serve: {
    positionals: [1, 1],
    options: ["db", "pg", "pg-schema", "port", "host", "secret-env", "max-active"],
  },
  ls: {
    positionals: [0, 0],
    options: ["db", "pg", "pg-schema", "status", "flow", "limit", "after", "json"],
  },
  show: { positionals: [1, 1], options: ["db", "pg", "pg-schema", "json"] },
  resume: { positionals: [1, 2], options: ["db", "pg", "pg-schema"] },
  cancel: { positionals: [1, 1], options: ["db", "pg", "pg-schema", "reason"] },
  schedules: { positionals: [0, 0], options: ["db", "pg", "pg-schema", "json"] },
  verify: { positionals: [1, 1], options: ["db", "pg", "pg-schema", "json"] },
  "erase-subject": { positionals: [1, 1], options: ["db", "pg", "pg-schema", "yes", "json"] },
  send: { positionals: [2, 2], options: ["db", "pg", "pg-schema", "topic", "key"] },
  fork: { positionals: [2, 2], options: ["db", "pg", "pg-schema", "id", "module", "quiet"] },
  ui: { positionals: [0, 0], options: ["db", "pg", "pg-schema", "port", "host", "allow-host"] },
};

const SIGNATURES: Record<string, string> = {
  init: "loom init [dir]",
  run: "loom run <module> <flow> [--input JSON] [--id ID] [--subject ID] [--quiet]",
  worker: "loom worker <module> [--max-active N]",
  serve: "loom serve <module> --port N --secret-env NAME [--host H] [--max-active N]",
  ls: "loom ls [--status S[,S]] [--flow NAME] [--limit N] [--after ID] [--json]",
  show: "loom show <id> [--json]",
  resume: "loom resume <id> [JSON]",
  cancel: "loom cancel <id> [--reason TEXT]",
  schedules: "loom schedules [--json]",
  verify: "loom verify <id> [--json]",
  "erase-subject": "loom erase-subject <subject> --yes [--json]",
  send: "loom send <id> <JSON> [--topic T] [--key K]",
  fork: "loom fork <id> <seq> [--id NEW] [--module M [--quiet]]",
  ui: "loom ui [--port N] [--host H] [--allow-host NAME[,NAME]]",
};

export function parseCommand(argv: readonly string[]): Command {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        db: { type: "string" },
        pg: { type: "string" },
        "pg-schema": { type: "string" },
        input: { type: "string" },
        id: { type: "string" },
        status: { type: "string" },
        json: { type: "boolean" },
        "max-active": { type: "string" },
        reason: { type: "string" },
        port: { type: "string" },
        "allow-host": { type: "string" },
        host: { type: "string" },
        "secret-env": { type: "string" },
        subject: { type: "string" },
        yes: { type: "boolean" },
        quiet: { type: "boolean", short: "q" },
        flow: { type: "string" },
        limit: { type: "string" },
        after: { type: "string" },
        topic: { type: "string" },
        key: { type: "string" },
        module: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  const { values, positionals } = parsed;
  const [name, ...rest] = positionals;
  if (values.help || name === "help") return { name: "help" };
  if (name === undefined) throw new UsageError("missing command", { showUsage: true });
  const spec = Object.hasOwn(ALLOWED, name) ? ALLOWED[name] : undefined;
  if (!spec) throw new UsageError(`unknown command "${name}"`, { showUsage: true });

  const checked = [
    "db",
    "pg",
    "pg-schema",
    "input",
    "id",
    "status",
    "json",
    "max-active",
    "port",
    "host",
    "secret-env",
    "reason",
    "subject",
    "yes",
    "quiet",
    "flow",
    "limit",
    "after",
    "topic",
    "key",
    "module",
  ] as const;
  for (const option of checked) {
    if (values[option] !== undefined && !spec.options.includes(option)) {
      throw new UsageError(`loom ${name} does not take --${option} (${SIGNATURES[name]})`);
    }
  }
  const [min, max] = spec.positionals;
  if (rest.length < min || rest.length > max) {
    const what = rest.length < min ? "missing arguments" : "too many arguments";
    throw new UsageError(`${what}: ${SIGNATURES[name]}`, { showUsage: true });
  }
  const db = values.db ?? DEFAULT_DB;
  if (db === "") throw new UsageError("--db needs a path");
  const where = { db, ...whereOnPostgres(values.db, values.pg, values["pg-schema"]) };
  const arg = (i: number): string => rest[i] ?? "";

  switch (name) {
    case "init":
      return {
        name,
        dir: rest[0] === undefined ? "." : nonEmpty(rest[0], "loom init", "a folder"),
      };
    case "run": {
      const input = values.input === undefined ? undefined : parseJson(values.input, "--input");
      return {
        name,
        ...where,
        module: arg(0),
        flow: arg(1),
        input,
        ...(values.id === undefined ? {} : { id: values.id }),
        ...(values.subject === undefined ? {} : { subject: parseSubject(values.subject) }),
        quiet: values.quiet ?? false,
      };
    }
    case "worker": {
      const maxActive = parseMaxActive(values["max-active"]);
      return maxActive === undefined
        ? { name, ...where, module: arg(0) }
        : { name, ...where, module: arg(0), maxActive };
    }
    case "serve": {
      const host = values.host ?? "127.0.0.1";
      if (host === "") throw new UsageError("--host needs a host name or address");
      const port = parsePort(values.port, "serve");
      const secretEnv = parseEnvName(values["secret-env"]);
      const command: Command = { name, ...where, module: arg(0), port, host, secretEnv };
      const maxActive = parseMaxActive(values["max-active"]);
      return maxActive === undefined ? command : { ...command, maxActive };
    }
    case "ls":
      return {
        name,
        ...where,
        json: values.json ?? false,
        ...(values.status === undefined ? {} : { status: parseStatuses(values.status) }),
        ...(values.flow === undefined ? {} : { flow: nonEmpty(values.flow, "--flow", "a name") }),
        ...(values.limit === undefined ? {} : { limit: parseCount(values.limit, "--limit") }),
        ...(values.after === undefined
          ? {}
          : { after: nonEmpty(values.after, "--after", "an id") }),
      };
    case "send":
      return {
        name,
        ...where,
        id: arg(0),
        message: parseJson(arg(1), "the message"),
        ...(values.topic === undefined
          ? {}
          : { topic: nonEmpty(values.topic, "--topic", "a name") }),
        ...(values.key === undefined ? {} : { key: nonEmpty(values.key, "--key", "a key") }),
      };
    case "fork": {
      if (values.quiet !== undefined && values.module === undefined) {
        throw new UsageError(`--quiet goes with --module: without it loom fork waits for nothing`);
      }
      return {
        name,
        ...where,
        id: arg(0),
        atSequence: parseSequence(arg(1)),
        ...(values.id === undefined ? {} : { newId: values.id }),
        ...(values.module === undefined
          ? {}
          : { module: nonEmpty(values.module, "--module", "a module path") }),
        quiet: values.quiet ?? false,
      };
    }
    case "ui": {
      const host = values.host ?? "127.0.0.1";
      if (host === "") throw new UsageError("--host needs a host name or address");
      const port = values.port === undefined ? DEFAULT_UI_PORT : parsePort(values.port, "ui");
      const allowHosts = (values["allow-host"] ?? "")
        .split(",")
        .map((h) => h.trim())
        .filter((h) => h !== "");
      if ((host === "0.0.0.0" || host === "::") && allowHosts.length === 0) {
        throw new UsageError(
          `--host ${host} needs --allow-host NAME[,NAME]: the names the dashboard is reached by (a server that answered any name would be open to DNS rebinding)`,
        );
      }
      return { name, ...where, port, host, allowHosts };
    }
    case "show":
      return { name, ...where, id: arg(0), json: values.json ?? false };
    case "schedules":
      return { name, ...where, json: values.json ?? false };
    case "verify":
      return { name, ...where, id: arg(0), json: values.json ?? false };
    case "erase-subject": {
      const subject = parseSubject(arg(0));
      if (values.yes !== true) {
        throw new UsageError(
          `loom erase-subject refuses without --yes: it would cancel every live execution holding ` +
            `data of subject ${JSON.stringify(subject)}, record SUBJECT_ERASED in each of their logs ` +
            `and destroy the subject's key, so its payloads can never be read again. This is ` +
            `irreversible: pass --yes to do it (${SIGNATURES["erase-subject"]})`,
        );
      }
      return { name, ...where, subject, json: values.json ?? false };
    }
    case "cancel":
      return values.reason === undefined
        ? { name, ...where, id: arg(0) }
        : { name, ...where, id: arg(0), reason: values.reason };
    default: {
      const payload = rest[1] === undefined ? undefined : parseJson(rest[1], "the resume payload");
      return { name: "resume", ...where, id: arg(0), payload };
    }
  }
}

/** A data subject id, as the runtime takes it (1 to 200 characters). */
function parseSubject(text: string): string {
  if (text === "" || text.length > 200) {
    throw new UsageError(
      `a subject must be 1 to 200 characters, got ${brief(JSON.stringify(text))}`,
    );
  }
  return text;
}

function parseMaxActive(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const maxActive = Number(text);
  if (!Number.isSafeInteger(maxActive) || maxActive < 1) {
    throw new UsageError(`--max-active needs a whole number >= 1, got ${JSON.stringify(text)}`);
  }
  return maxActive;
}

function parsePort(text: string | undefined, command: "serve" | "ui"): number {
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
function parseEnvName(text: string | undefined): string {
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
function parseCount(text: string, flag: string): number {
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`${flag} needs a whole number >= 1, got ${JSON.stringify(text)}`);
  }
  return n;
}

/** A fork point: a sequence number of the log (0 is its EXECUTION_STARTED). */
function parseSequence(text: string): number {
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n)) {
    throw new UsageError(
      `the fork point needs a sequence number >= 0 (loom show lists them), got ${JSON.stringify(text)}`,
    );
  }
  return n;
}

function nonEmpty(text: string, flag: string, what: string): string {
  if (text === "") throw new UsageError(`${flag} needs ${what}`);
  return text;
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    throw new UsageError(`${what} is not valid JSON (${reason}): ${brief(text)}`);
  }
}

function parseStatuses(text: string): ExecutionStatus[] {
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
function whereOnPostgres(
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
