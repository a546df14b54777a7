/**
 * Opens the runtime a command works with, on the SQLite database named by `--db`.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { createRuntime, type Runtime } from "../runtime/runtime.ts";
import { sqliteStore } from "../store/sqlite/index.ts";
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

export function openRuntime(db: string, cwd: string, options: OpenOptions): Runtime {
  const path = resolve(cwd, db);
  if (options.mustExist && !existsSync(path)) {
    throw new CliError(`no database at ${path} (run a flow first, or pass --db PATH)`);
  }
  return createRuntime({
    store: sqliteStore(path),
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
