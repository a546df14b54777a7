/**
 * The command's own failures. A `UsageError` is a command line that cannot mean anything (exit 2);
 * a `CliError` is a well-formed command that cannot be carried out (exit 1). Loom's own errors
 * pass through untouched so their stable `code` reaches the user.
 */
import { ensureError, isLoomError } from "../kernel/errors.ts";

export class UsageError extends Error {
  /** Print the usage text after the message (unknown command, missing arguments). */
  readonly showUsage: boolean;

  constructor(message: string, options: { showUsage?: boolean } = {}) {
    super(message);
    this.name = "UsageError";
    this.showUsage = options.showUsage ?? false;
  }
}

export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CliError";
  }
}

/** One line: a Loom error's code and message, or any other error's message. */
export function errorLine(thrown: unknown): string {
  if (isLoomError(thrown)) return oneLine(`${thrown.code} ${thrown.message}`);
  return oneLine(ensureError(thrown).message);
}

export function exitCodeOf(thrown: unknown): number {
  return thrown instanceof UsageError ? 2 : 1;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim();
}
