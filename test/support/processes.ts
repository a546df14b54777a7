/**
 * Every process a test starts, started so that the suite can end it (issue 21 item 10): a test
 * that fails or times out skips its own cleanup, and a child it started (a `loom worker`, a
 * crash fixture, the esbuild service `--import tsx` starts, an isolated effect's child) would
 * outlive the run.
 *
 * P1: `spawn` and `execFile` here are node's, with `detached: true`: the child leads its own
 *     process group, and whatever it starts joins that group unless it detaches itself.
 * P2: the group id is appended to `$LOOM_TEST_RUN_DIR/pgids` before the call returns, so a
 *     worker killed right after still leaves it on record.
 * P3: test/support/kill-children.ts, a global setup, makes the run directory and on teardown
 *     SIGKILLs every recorded group, then any process left carrying this run's
 *     `LOOM_TEST_RUN` marker in its environment (a child forked by a test's own worker).
 */
import * as cp from "node:child_process";
import { appendFileSync } from "node:fs";
import { join } from "node:path";

function record(child: cp.ChildProcess): void {
  const dir = process.env.LOOM_TEST_RUN_DIR;
  // Outside vitest (a fixture run by hand) there is no run to record it in.
  if (dir && child.pid !== undefined) appendFileSync(join(dir, "pgids"), `${child.pid}\n`);
}

/**
 * node's `spawn` in a process group of its own, recorded for the suite's teardown (P1, P2). It
 * has node's overloads, so a call site changes only its import.
 */
export const spawn = ((
  command: string,
  argsOrOptions?: readonly string[] | cp.SpawnOptions,
  maybeOptions?: cp.SpawnOptions,
): cp.ChildProcess => {
  const args = Array.isArray(argsOrOptions) ? (argsOrOptions as readonly string[]) : [];
  const options = (Array.isArray(argsOrOptions) ? maybeOptions : argsOrOptions) ?? {};
  const child = cp.spawn(command, args, { ...options, detached: true });
  record(child);
  return child;
}) as typeof cp.spawn;

/**
 * Runs a command to its end in a process group of its own (P1, P2), like a promised
 * `execFile` (which cannot detach): resolves with its output when it exits 0, rejects otherwise.
 */
export function execFile(
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<{ stdout: string; stderr: string }> {
  const { timeoutMs, ...rest } = options;
  const child = spawn(command, args, { ...rest, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => killGroup(child), timeoutMs);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ stdout, stderr });
      else reject(new Error(`${command} exited ${code ?? signal}: ${stderr}`));
    });
  });
}

/** Sends `signal` to the child's whole group; a group already gone is not an error. */
export function killGroup(child: cp.ChildProcess, signal: NodeJS.Signals = "SIGKILL"): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // ESRCH: the group has ended.
  }
}

/** A `tsx` script run as an owner process a test kills or waits for: its stdout and its exit. */
export interface OwnerProcess {
  p: cp.ChildProcess;
  out(): string;
  exited(): boolean;
  exit: Promise<void>;
}

/**
 * Runs `node --import tsx script ...args` in its own process group (P1, P2), its stdout kept,
 * stderr shown; `live` holds it until it exits, for an afterEach that kills what is left.
 */
export function ownerProcess(
  script: string,
  args: readonly string[],
  live: Set<cp.ChildProcess>,
): OwnerProcess {
  const p = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  live.add(p);
  let out = "";
  p.stdout?.on("data", (b: Buffer) => (out += b.toString()));
  let exited = false;
  const exit = new Promise<void>((r) =>
    p.on("exit", () => {
      exited = true;
      live.delete(p);
      r();
    }),
  );
  return { p, out: () => out, exited: () => exited, exit };
}
