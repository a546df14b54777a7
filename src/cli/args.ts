/**
 * The command line, parsed into one typed command.
 *
 * Everything a command line alone can get wrong (an unknown command or flag, a missing argument,
 * JSON that does not parse, an unknown status) is a `UsageError` raised here, before any module
 * is loaded or any database opened.
 *
 * `parseCommand` composes the pieces: the flags as `parseArgs` reads them and the table of which
 * each command takes (args-flags.ts), the database every command but `init` opens, and the
 * command's own parser (args-parsers.ts) over the values it checks (args-values.ts).
 */
import { DEFAULT_DB, type Command } from "./args-command.ts";
import { checkFlags, isCommandName, parseFlags } from "./args-flags.ts";
import { PARSERS } from "./args-parsers.ts";
import { whereOnPostgres } from "./args-values.ts";
import { UsageError } from "./cli-error.ts";

export { DEFAULT_DB, DEFAULT_PG_SCHEMA, DEFAULT_UI_PORT, type Command } from "./args-command.ts";
export { USAGE } from "./args-usage.ts";

export function parseCommand(argv: readonly string[]): Command {
  const { values, positionals } = parseFlags(argv);
  const [name, ...rest] = positionals;
  if (values.help || name === "help") return { name: "help" };
  if (name === undefined) throw new UsageError("missing command", { showUsage: true });
  if (!isCommandName(name)) throw new UsageError(`unknown command "${name}"`, { showUsage: true });
  checkFlags(name, values, rest);
  const db = values.db ?? DEFAULT_DB;
  if (db === "") throw new UsageError("--db needs a path");
  const where = { db, ...whereOnPostgres(values.db, values.pg, values["pg-schema"]) };
  return PARSERS[name]({ values, rest, where, arg: (i) => rest[i] ?? "" });
}
