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

export const USAGE = `usage: loom <command> [arguments] [--db PATH]

commands:
  run <module> <flow> [--input JSON] [--id ID]
                         start a flow of <module> and wait for its outcome (printed as JSON)
  worker <module> [--max-active N]
                         drive the module's flows and recover abandoned executions
                         (at most N at once) until SIGINT or SIGTERM
  ls [--status S[,S]] [--json]
                         list executions, optionally only those with these statuses
  show <id> [--json]     an execution's folded state and the timeline of its log
  resume <id> [JSON]     answer an execution's suspend with a JSON payload
  cancel <id> [--reason TEXT]
                         cancel an execution; its owner aborts what is in flight
  schedules [--json]     the cron schedules, with each one's next occurrence

options:
  --db PATH              the SQLite database (default ${DEFAULT_DB})
  -h, --help             print this help

statuses: ${EXECUTION_STATUSES.join(", ")}
exit codes: 0 success, 1 error or failed flow, 2 usage error
docs: docs/cli.md`;

interface Common {
  /** As given on the command line; resolved against the working directory when opened. */
  db: string;
}

export type Command =
  | { name: "help" }
  | (Common & { name: "run"; module: string; flow: string; input: unknown; id?: string })
  | (Common & { name: "worker"; module: string; maxActive?: number })
  | (Common & { name: "ls"; status?: ExecutionStatus[]; json: boolean })
  | (Common & { name: "show"; id: string; json: boolean })
  | (Common & { name: "resume"; id: string; payload: unknown })
  | (Common & { name: "cancel"; id: string; reason?: string })
  | (Common & { name: "schedules"; json: boolean });

type OptionName = "db" | "input" | "id" | "status" | "json" | "max-active" | "reason";

const ALLOWED: Record<string, { positionals: [number, number]; options: OptionName[] }> = {
  run: { positionals: [2, 2], options: ["db", "input", "id"] },
  worker: { positionals: [1, 1], options: ["db", "max-active"] },
  ls: { positionals: [0, 0], options: ["db", "status", "json"] },
  show: { positionals: [1, 1], options: ["db", "json"] },
  resume: { positionals: [1, 2], options: ["db"] },
  cancel: { positionals: [1, 1], options: ["db", "reason"] },
  schedules: { positionals: [0, 0], options: ["db", "json"] },
};

const SIGNATURES: Record<string, string> = {
  run: "loom run <module> <flow> [--input JSON] [--id ID]",
  worker: "loom worker <module> [--max-active N]",
  ls: "loom ls [--status S[,S]] [--json]",
  show: "loom show <id> [--json]",
  resume: "loom resume <id> [JSON]",
  cancel: "loom cancel <id> [--reason TEXT]",
  schedules: "loom schedules [--json]",
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
        input: { type: "string" },
        id: { type: "string" },
        status: { type: "string" },
        json: { type: "boolean" },
        "max-active": { type: "string" },
        reason: { type: "string" },
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

  for (const option of ["db", "input", "id", "status", "json", "max-active"] as const) {
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
  const arg = (i: number): string => rest[i] ?? "";

  switch (name) {
    case "run": {
      const input = values.input === undefined ? undefined : parseJson(values.input, "--input");
      const command: Command = { name, db, module: arg(0), flow: arg(1), input };
      return values.id === undefined ? command : { ...command, id: values.id };
    }
    case "worker": {
      const max = values["max-active"];
      if (max === undefined) return { name, db, module: arg(0) };
      const maxActive = Number(max);
      if (!Number.isSafeInteger(maxActive) || maxActive < 1) {
        throw new UsageError(`--max-active needs a whole number >= 1, got ${JSON.stringify(max)}`);
      }
      return { name, db, module: arg(0), maxActive };
    }
    case "ls": {
      const json = values.json ?? false;
      return values.status === undefined
        ? { name, db, json }
        : { name, db, json, status: parseStatuses(values.status) };
    }
    case "show":
      return { name, db, id: arg(0), json: values.json ?? false };
    case "schedules":
      return { name, db, json: values.json ?? false };
    case "cancel":
      return values.reason === undefined
        ? { name, db, id: arg(0) }
        : { name, db, id: arg(0), reason: values.reason };
    default: {
      const payload = rest[1] === undefined ? undefined : parseJson(rest[1], "the resume payload");
      return { name: "resume", db, id: arg(0), payload };
    }
  }
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
