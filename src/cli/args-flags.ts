/**
 * The command line's flags: how `parseArgs` reads them, and a table of which flags and how many
 * arguments each command takes, with the signature its errors quote.
 *
 * Invariant: a flag a command does not take, or too few or too many arguments, is a UsageError,
 * found in the same order every time (the flags in `CHECKED` order, then the arguments).
 */
import { parseArgs } from "node:util";
import type { CommandName } from "./args-command.ts";
import { UsageError } from "./cli-error.ts";

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
  | "token-file"
  | "read-only"
  | "secret-env"
  | "secret-file"
  | "worker-id"
  | "tls-cert"
  | "tls-key"
  | "max-connections"
  | "max-unverified-bytes"
  | "request-timeout-ms"
  | "subject"
  | "yes"
  | "quiet"
  | "flow"
  | "limit"
  | "after"
  | "principal"
  | "sort"
  | "topic"
  | "key"
  | "module"
  | "budget"
  | "keep-deadline"
  | "step"
  | "llm";

/** The flags `checkFlags` looks at, in the order it looks at them. */
const CHECKED = [
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
  "secret-file",
  "worker-id",
  "tls-cert",
  "tls-key",
  "max-connections",
  "max-unverified-bytes",
  "request-timeout-ms",
  "reason",
  "subject",
  "yes",
  "quiet",
  "flow",
  "limit",
  "after",
  "principal",
  "sort",
  "topic",
  "key",
  "module",
  "budget",
  "keep-deadline",
  "step",
  "llm",
] as const;

/** The line, split into flags and positionals; a flag `parseArgs` does not know is a UsageError. */
export function parseFlags(argv: readonly string[]) {
  try {
    return parseArgs({
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
        "token-file": { type: "string" },
        "read-only": { type: "boolean" },
        host: { type: "string" },
        "secret-env": { type: "string" },
        "secret-file": { type: "string" },
        "worker-id": { type: "string" },
        "tls-cert": { type: "string" },
        "tls-key": { type: "string" },
        "max-connections": { type: "string" },
        "max-unverified-bytes": { type: "string" },
        "request-timeout-ms": { type: "string" },
        subject: { type: "string" },
        yes: { type: "boolean" },
        quiet: { type: "boolean", short: "q" },
        flow: { type: "string" },
        limit: { type: "string" },
        after: { type: "string" },
        principal: { type: "string" },
        sort: { type: "string" },
        topic: { type: "string" },
        key: { type: "string" },
        module: { type: "string" },
        budget: { type: "string" },
        "keep-deadline": { type: "boolean" },
        step: { type: "string" },
        llm: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

export type FlagValues = ReturnType<typeof parseFlags>["values"];

interface CommandSpec {
  /** The fewest and the most positional arguments. */
  positionals: [number, number];
  options: OptionName[];
}

const ALLOWED: Record<CommandName, CommandSpec> = {
  init: { positionals: [0, 1], options: [] },
  run: {
    positionals: [2, 2],
    options: ["db", "pg", "pg-schema", "input", "id", "subject", "quiet"],
  },
  worker: { positionals: [1, 1], options: ["db", "pg", "pg-schema", "max-active"] },
  serve: {
    positionals: [1, 1],
    options: [
      ...["db", "pg", "pg-schema", "port", "host", "secret-env", "secret-file", "worker-id"],
      ...["tls-cert", "tls-key", "max-active", "max-connections", "max-unverified-bytes"],
      "request-timeout-ms",
    ] as OptionName[],
  },
  ls: {
    positionals: [0, 0],
    options: [
      "db",
      "pg",
      "pg-schema",
      "status",
      "flow",
      "principal",
      "sort",
      "limit",
      "after",
      "json",
    ],
  },
  show: { positionals: [1, 1], options: ["db", "pg", "pg-schema", "json", "step", "llm"] },
  resume: { positionals: [1, 2], options: ["db", "pg", "pg-schema"] },
  cancel: { positionals: [1, 1], options: ["db", "pg", "pg-schema", "reason"] },
  schedules: { positionals: [0, 2], options: ["db", "pg", "pg-schema", "json"] },
  verify: { positionals: [1, 1], options: ["db", "pg", "pg-schema", "json"] },
  "erase-subject": { positionals: [1, 1], options: ["db", "pg", "pg-schema", "yes", "json"] },
  send: { positionals: [2, 2], options: ["db", "pg", "pg-schema", "topic", "key"] },
  fork: {
    positionals: [2, 2],
    options: ["db", "pg", "pg-schema", "id", "budget", "keep-deadline", "module", "quiet"],
  },
  ui: {
    positionals: [0, 0],
    options: [
      ...["db", "pg", "pg-schema", "port", "host", "allow-host", "token-file", "read-only"],
      "module",
    ] as OptionName[],
  },
};

export const SIGNATURES: Record<CommandName, string> = {
  init: "loom init [dir]",
  run: "loom run <module> <flow> [--input JSON] [--id ID] [--subject ID] [--quiet]",
  worker: "loom worker <module> [--max-active N]",
  serve:
    "loom serve <module> --port N (--secret-env NAME | --secret-file PATH) [--host H] [--worker-id ID] [--tls-cert FILE --tls-key FILE] [--max-active N] [--max-connections N] [--max-unverified-bytes N] [--request-timeout-ms N]",
  ls: "loom ls [--status S[,S]] [--flow NAME] [--limit N] [--after ID] [--json]",
  show: "loom show <id> [--step NAME | --llm] [--json]",
  resume: "loom resume <id> [JSON]",
  cancel: "loom cancel <id> [--reason TEXT]",
  schedules: "loom schedules [--json] | loom schedules pause|resume <name>",
  verify: "loom verify <id> [--json]",
  "erase-subject": "loom erase-subject <subject> --yes [--json]",
  send: "loom send <id> <JSON> [--topic T] [--key K]",
  fork: "loom fork <id> <seq> [--id NEW] [--budget JSON] [--keep-deadline] [--module M [--quiet]]",
  ui: "loom ui [--port N] [--host H] [--allow-host NAME[,NAME]] [--token-file PATH] [--read-only] [--module M]",
};

export function isCommandName(name: string): name is CommandName {
  return Object.hasOwn(ALLOWED, name);
}

/** Refuses a flag `name` does not take, then a count of arguments it does not take. */
export function checkFlags(name: CommandName, values: FlagValues, rest: readonly string[]): void {
  const spec = ALLOWED[name];
  for (const option of CHECKED) {
    if (values[option] !== undefined && !spec.options.includes(option)) {
      throw new UsageError(`loom ${name} does not take --${option} (${SIGNATURES[name]})`);
    }
  }
  const [min, max] = spec.positionals;
  if (rest.length < min || rest.length > max) {
    const what = rest.length < min ? "missing arguments" : "too many arguments";
    throw new UsageError(`${what}: ${SIGNATURES[name]}`, { showUsage: true });
  }
}
