/**
 * `loom serve`'s secret and TLS flags: where the worker secret is read from (an environment
 * variable or a file, never the command line, where `ps` shows it), and the certificate files.
 */
import { SIGNATURES } from "./args-flags.ts";
import { nonEmpty, parseEnvName } from "./args-values.ts";
import { UsageError } from "./cli-error.ts";

/** `--secret-env NAME` or `--secret-file PATH`: one of them, not both. */
export function parseSecretSource(
  env: string | undefined,
  file: string | undefined,
): { secretEnv: string } | { secretFile: string } {
  if (env !== undefined && file !== undefined) {
    throw new UsageError("--secret-env and --secret-file name two secrets: pass one");
  }
  if (file !== undefined) return { secretFile: nonEmpty(file, "--secret-file", "a file path") };
  if (env === undefined) {
    throw new UsageError(
      `loom serve needs --secret-env NAME or --secret-file PATH (${SIGNATURES.serve})`,
    );
  }
  return { secretEnv: parseEnvName(env) };
}

/** `--tls-cert FILE --tls-key FILE`: both or neither. */
export function parseTls(
  cert: string | undefined,
  key: string | undefined,
): { tls?: { certFile: string; keyFile: string } } {
  if (cert === undefined && key === undefined) return {};
  if (cert === undefined || key === undefined) {
    throw new UsageError("--tls-cert and --tls-key go together: the certificate and its key");
  }
  return {
    tls: {
      certFile: nonEmpty(cert, "--tls-cert", "a file path"),
      keyFile: nonEmpty(key, "--tls-key", "a file path"),
    },
  };
}
