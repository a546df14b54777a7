/**
 * The isolated executor (K7): `isolated(effect, { module: import.meta.url })` runs an effect in a
 * child process of its own.
 *
 * - Memory: `memBytes` is the child's peak RSS, as the child reports it when it finishes
 *   (`getrusage` max RSS). A child that is killed or crashes cannot report; on Linux the parent
 *   samples `/proc/<pid>/status` VmHWM while it runs, and meters the last sample as an estimate.
 * - Abort: the signal sends SIGTERM (the child aborts the effect's own signal and exits), then
 *   SIGKILL after `killGraceMs`, so code that ignores its signal, even a busy loop, is stopped.
 *   The step settles only once the child is gone.
 * - A child that exits before it answers is a typed step failure (`IsolatedCrashError`).
 * - Environment: the child inherits none of this process's environment but the allow-listed
 *   basics (ALLOWED_ENV: PATH, HOME, the locale, the temp dir; never NODE_OPTIONS), plus what the
 *   caller passes in `env`. A secret in this process's environment (`LOOM_CODEC_KEYS`,
 *   `LOOM_AUDIT_KEY`, a worker secret) never reaches the child unless passed on purpose.
 *
 * A function cannot cross a process boundary, so the child imports the module that defines the
 * effect and finds it there by name: define isolated effects in a module that does nothing else
 * when it is imported (no runtime, no server), and export them.
 */
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { isAbsolute } from "node:path";
import { pathToFileURL } from "node:url";
import {
  errorFromData,
  InvalidInputError,
  defineError,
  registerErrorClass,
} from "../kernel/errors.ts";
import { assertPeer } from "../peers.ts";
import type { ResourceDelta } from "../kernel/resources.ts";
import type { Effect, EffectContext } from "./effect.ts";
import { reasonOf } from "./delay.ts";
import { INNER, type ChildReply, type ChildRequest } from "./isolated-protocol.ts";

/** An isolated child exited, or could not start, before it answered (`details`: `{ exitCode, signal }`). */
export class IsolatedCrashError extends defineError("LOOM_ISOLATED_CRASH") {}

registerErrorClass(IsolatedCrashError.code, IsolatedCrashError);

export interface IsolatedOptions {
  /** The module that defines and exports the effect: pass `import.meta.url`. */
  module: string | URL;
  /** The export to run (default: the exported effect with this effect's name). */
  export?: string;
  /** Milliseconds between SIGTERM and SIGKILL after an abort (default 500). */
  killGraceMs?: number;
  /** Node flags for the child, such as `--max-old-space-size=512`. */
  execArgv?: readonly string[];
  /**
   * Variables the child gets besides the allow-listed basics (ALLOWED_ENV): nothing else of this
   * process's environment reaches it.
   */
  env?: Readonly<Record<string, string>>;
}

/** What the child inherits of this process's environment: the basics, and no secret. */
export const ALLOWED_ENV: readonly string[] = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "LANG",
  "LANGUAGE",
  "LC_ALL",
  "LC_CTYPE",
  "TZ",
  "TMPDIR",
  "TMP",
  "TEMP",
  // Windows needs these to start a process at all.
  "SYSTEMROOT",
  "SystemRoot",
  "WINDIR",
  "COMSPEC",
  "PATHEXT",
];

/** The child's environment: the allow-listed basics of this process's, then the caller's own. */
function childEnv(given: Readonly<Record<string, string>> | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of ALLOWED_ENV) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...given };
}

export type IsolatedEffect<I, O> = Effect<I, O> & { readonly [INNER]: Effect<I, O> };

/** The child script: TypeScript when Loom runs from its sources, JavaScript from dist/. */
const CHILD = new URL(
  import.meta.url.endsWith(".ts") ? "./isolated-child.ts" : "./isolated-child.js",
  import.meta.url,
);
const TYPESCRIPT = /\.(?:ts|mts|cts|tsx)$/;

/**
 * The child's loader flags: tsx (an optional peer) when the child script or the user's module
 * is TypeScript, nothing for JavaScript. A missing tsx is refused when the effect is made.
 */
function loaderArgs(module: string): string[] {
  if (!TYPESCRIPT.test(CHILD.pathname) && !TYPESCRIPT.test(new URL(module).pathname)) return [];
  assertPeer("tsx", "isolated() with a TypeScript module");
  return ["--import", pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href];
}
const SAMPLE_MS = 50;

export function isolated<I, O>(
  effect: Effect<I, O>,
  options: IsolatedOptions,
): IsolatedEffect<I, O> {
  if (!effect || typeof effect.run !== "function" || typeof effect.name !== "string") {
    throw new InvalidInputError("isolated needs an effect ({ name, run }) or a step$");
  }
  const module = moduleHref(options?.module);
  const loader = loaderArgs(module);
  const grace = options.killGraceMs ?? 500;
  if (typeof grace !== "number" || !Number.isFinite(grace) || grace < 0) {
    throw new InvalidInputError(`isolated killGraceMs must be a number >= 0, got ${String(grace)}`);
  }
  const execArgv = [...(options.execArgv ?? [])];
  if (!execArgv.every((a) => typeof a === "string")) {
    throw new InvalidInputError("isolated execArgv must be strings");
  }
  const env = checkedEnv(options.env);
  const request = (input: I, ectx: EffectContext): ChildRequest => {
    const r: ChildRequest = {
      module,
      name: effect.name,
      input: input as ChildRequest["input"],
      executionId: ectx.executionId,
      stepId: ectx.stepId,
      attempt: ectx.attempt,
      idempotencyKey: ectx.idempotencyKey,
      resources: ectx.resources,
    };
    if (options.export !== undefined) r.export = options.export;
    return r;
  };
  // What the kernel checks before a call (input shape, taint) is the wrapped effect's too: an
  // isolated shell tool must refuse tainted input exactly as the bare one does.
  const wrapped: IsolatedEffect<I, O> = {
    name: effect.name,
    [INNER]: effect,
    run: (input, ectx) =>
      runInChild<O>(request(input, ectx), ectx, grace, [...execArgv, ...loader], childEnv(env)),
    ...(effect.options ? { options: effect.options } : {}),
    ...(effect.checkInput ? { checkInput: (input: I) => effect.checkInput?.(input) } : {}),
    ...(effect.refusesTainted !== undefined ? { refusesTainted: effect.refusesTainted } : {}),
    ...(effect.taintsOutput !== undefined ? { taintsOutput: effect.taintsOutput } : {}),
  };
  return wrapped;
}

function checkedEnv(env: unknown): Readonly<Record<string, string>> | undefined {
  if (env !== undefined) {
    const ok =
      env !== null &&
      typeof env === "object" &&
      Object.values(env as Record<string, unknown>).every((v) => typeof v === "string");
    if (!ok) throw new InvalidInputError("isolated env must be an object of strings");
  }
  return env as Readonly<Record<string, string>> | undefined;
}

function moduleHref(module: unknown): string {
  if (module instanceof URL) module = module.href;
  if (typeof module === "string" && module.startsWith("file:")) return module;
  if (typeof module === "string" && isAbsolute(module)) return pathToFileURL(module).href;
  throw new InvalidInputError(
    "isolated needs { module: import.meta.url }: the file URL or absolute path of the module that exports the effect",
  );
}

function runInChild<O>(
  request: ChildRequest,
  ectx: EffectContext,
  grace: number,
  execArgv: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<O> {
  const signal = ectx.signal;
  if (signal.aborted) return Promise.reject(reasonOf(signal));
  return new Promise<O>((resolve, reject) => {
    const child = fork(CHILD, [], {
      execArgv: [...execArgv],
      env,
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    let reply: ChildReply | undefined;
    let spawnError: Error | undefined;
    let sampled: number | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const sampler =
      process.platform === "linux"
        ? setInterval(() => {
            const hwm = peakRssOf(child.pid);
            if (hwm !== undefined) sampled = Math.max(sampled ?? 0, hwm);
          }, SAMPLE_MS)
        : undefined;
    const onAbort = () => {
      child.kill("SIGTERM");
      killTimer = setTimeout(() => child.kill("SIGKILL"), grace);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    child.on("message", (m: ChildReply) => {
      if (m.type === "meter") ectx.meter(m.delta as ResourceDelta);
      else reply = m;
    });
    let settled = false;
    // "close", not "exit": it follows the last message, so an answer is never taken for a crash.
    const finish = (exitCode: number | null, exitSignal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      if (sampler) clearInterval(sampler);
      if (killTimer) clearTimeout(killTimer);
      signal.removeEventListener("abort", onAbort);
      const reported = reply && reply.type !== "meter" ? reply.maxRssBytes : undefined;
      const peak = reported ?? sampled;
      if (peak !== undefined) {
        ectx.meter(
          reported !== undefined ? { memBytes: peak } : { memBytes: peak, estimated: true },
        );
      }
      if (signal.aborted) return reject(reasonOf(signal));
      if (reply?.type === "done") return resolve(reply.output as O);
      if (reply?.type === "failed") return reject(errorFromData(reply.error));
      const how = exitSignal ? `was killed by ${exitSignal}` : `exited with code ${exitCode}`;
      reject(
        new IsolatedCrashError(
          `the isolated child of effect "${request.name}" ${how} before it answered${spawnError ? ` (${spawnError.message})` : ""}`,
          { exitCode, signal: exitSignal },
        ),
      );
    };
    child.on("close", finish);
    child.on("error", (e) => {
      spawnError ??= e;
      // A process that never started emits no "close".
      if (child.pid === undefined) finish(null, null);
    });
    if (child.pid !== undefined) child.send(request, (e) => e && (spawnError ??= e));
  });
}

/** The peak resident set of a live process (Linux VmHWM), in bytes. */
function peakRssOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m?.[1] ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}
