/**
 * How the CLI reads its secrets (the worker secret, the codec keys, the audit key): once, from an
 * environment variable or from a file, and then out of the environment this process and its
 * children see.
 *
 * Invariants (tests cite Q1..Q3):
 * Q1. A secret read from an environment variable is deleted from `process.env` as it is read, so
 *     a child process started afterwards does not inherit it. The kernel's copy of the
 *     environment (`/proc/self/environ`) cannot be rewritten from Node: a secret given in the
 *     environment stays readable there by anyone who may read this process's memory. The file
 *     form (`--secret-file`, `LOOM_*_FILE`) keeps it out of the environment altogether.
 * Q2. A secret file's text is the secret, less one trailing newline; a file that cannot be read
 *     is a CliError naming the file, never quoting what is in it.
 * Q3. The secrets are taken from the environment once per process and kept in memory
 *     (environmentWithSecrets): a later runtime of the same command gets the same codec and
 *     audit, though the variables are gone.
 */
import { readFileSync } from "node:fs";
import { CliError } from "./cli-error.ts";

/** The variables holding a secret, deleted once read (Q1). */
export const SECRET_VARIABLES = ["LOOM_CODEC_KEYS", "LOOM_AUDIT_KEY"] as const;

/** The secret in `path` (Q2); `what` names it in an error (e.g. `--secret-file`). */
export function readSecretFile(path: string, what: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    throw new CliError(
      `cannot read ${what} ${path}${typeof code === "string" ? ` (${code})` : ""}`,
    );
  }
  return text.replace(/\r?\n$/, "");
}

/** The value of `name` in `env`, deleted from it (Q1). */
export function takeVariable(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  delete env[name];
  return value;
}

/**
 * The environment's secrets with each `NAME_FILE` form read (Q2): `LOOM_CODEC_KEYS_FILE` and
 * `LOOM_AUDIT_KEY_FILE` give the value of `LOOM_CODEC_KEYS` and `LOOM_AUDIT_KEY` from a file; a
 * variable and its file form together are an error. The variables are deleted from `env` (Q1).
 */
export function takeSecrets(env: NodeJS.ProcessEnv): Partial<Record<string, string>> {
  const taken: Partial<Record<string, string>> = {};
  for (const name of SECRET_VARIABLES) {
    const file = env[`${name}_FILE`];
    const value = takeVariable(env, name);
    if (file !== undefined && value !== undefined) {
      throw new CliError(`${name} and ${name}_FILE are both set: set one`);
    }
    if (file !== undefined) taken[name] = readSecretFile(file, `${name}_FILE`);
    else if (value !== undefined) taken[name] = value;
  }
  return taken;
}

/** The secrets taken from the environment so far, by variable name (Q3). */
const kept: Partial<Record<string, string>> = {};

/**
 * `process.env` as it was before its secrets were taken (Q3): the secrets are taken out of it
 * (Q1) the first time, and kept for every later call. A variable set again since (a test, or a
 * program embedding the CLI) is taken again.
 */
export function environmentWithSecrets(): NodeJS.ProcessEnv {
  Object.assign(kept, takeSecrets(process.env));
  return { ...process.env, ...kept };
}
