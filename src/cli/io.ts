import { redactPasswords } from "./redact.ts";

/**
 * Where a command writes and where it runs: passed in, so a command never reaches for `process`
 * on its own and stays callable from a test.
 */
export interface Io {
  /** Writes one line (or block) to standard output. */
  out(text: string): void;
  /** Writes one line (or block) to standard error. */
  err(text: string): void;
  /** The directory module paths and `--db` are resolved against. */
  cwd: string;
  /** Verbose errors (a stack trace after the one-line message). */
  debug: boolean;
}

export function processIo(): Io {
  return {
    // R1: no printed line carries a URL's password (a --pg URL echoed in a hint or an error).
    out: (text) => void process.stdout.write(`${redactPasswords(text)}\n`),
    err: (text) => void process.stderr.write(`${redactPasswords(text)}\n`),
    cwd: process.cwd(),
    debug: Boolean(process.env.LOOM_DEBUG),
  };
}
