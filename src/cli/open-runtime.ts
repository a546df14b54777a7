/**
 * Opens the runtime a command works with: on the SQLite database named by `--db`, or on the
 * PostgreSQL one named by `--pg` (and `--pg-schema`).
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { createRuntime, type Runtime } from "../runtime/runtime.ts";
import { sqliteStore } from "../store/sqlite/index.ts";
import { postgresStore } from "../store/postgres/index.ts";
import type { Store } from "../store/spi.ts";
import { CliError } from "./cli-error.ts";

export interface OpenOptions {
  /** Run the background loop (timers, recovery). Read-only commands turn it off. */
  background: boolean;
  /**
   * Refuse a database file that does not exist yet, rather than create an empty one: a command
   * that only reads or answers an existing execution has nothing to do in a new database.
   */
  mustExist: boolean;
  onError?: (error: Error) => void;
  /** The most executions this process drives at once (default: no limit). */
  maxActive?: number;
  /** Which abandoned executions to recover (default: all of the module's flows). */
  recoverWhere?: (executionId: string) => boolean;
}

/** Where a command's executions are: `--db PATH`, or `--pg URL` with its schema. */
export interface Database {
  db: string;
  pg?: { url: string; schema: string };
}

/** What `--db` or `--pg` names, as it is written on the command line (for messages). */
export const describeDatabase = (where: Database): string =>
  where.pg ? `postgres schema ${where.pg.schema}` : `db ${where.db}`;

async function openStore(where: Database, cwd: string, mustExist: boolean): Promise<Store> {
  if (where.pg) {
    try {
      return await postgresStore({ connectionString: where.pg.url, schema: where.pg.schema });
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      throw new CliError(`cannot open PostgreSQL (${where.pg.schema}): ${why}`);
    }
  }
  const path = resolve(cwd, where.db);
  if (mustExist && !existsSync(path)) {
    throw new CliError(`no database at ${path} (run a flow first, or pass --db PATH)`);
  }
  return sqliteStore(path);
}

export async function openRuntime(
  where: Database,
  cwd: string,
  options: OpenOptions,
): Promise<Runtime> {
  return createRuntime({
    store: await openStore(where, cwd, options.mustExist),
    background: options.background,
    features: featuresFromEnv(process.env.LOOM_FEATURES),
    ...(options.onError ? { onError: options.onError } : {}),
    ...(options.recoverWhere ? { recoverWhere: options.recoverWhere } : {}),
    ...(options.maxActive !== undefined ? { maxActive: options.maxActive } : {}),
  });
}

/**
 * The fleet-wide feature flags, from `LOOM_FEATURES` (a comma list, e.g. `continueAsNew`): every
 * process sharing the database must agree (ADR 0109 D8), so they are the deployment's setting,
 * not a command's option.
 */
export function featuresFromEnv(value: string | undefined): { continueAsNew?: boolean } {
  const names = (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const name of names) {
    if (name !== "continueAsNew") {
      throw new CliError(
        `LOOM_FEATURES: unknown feature ${JSON.stringify(name)} (known: continueAsNew)`,
      );
    }
  }
  return names.includes("continueAsNew") ? { continueAsNew: true } : {};
}
