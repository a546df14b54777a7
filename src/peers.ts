/**
 * Optional peer packages, loaded when the part of Loom that needs them is first used.
 *
 * The root entry imports no SDK and no database driver (issue 19): each integration sits behind
 * its own subpath (`loomwork/anthropic`, `loomwork/sqlite`, ...), and even there its package is
 * loaded through these functions, so a missing one is a `MissingDependencyError` that says what
 * to install, raised before anything is recorded, instead of a module-resolution failure at
 * import time.
 *
 * P1: a package resolves as Node resolves it from Loom's own files: a peer is installed beside
 *     Loom, in the application's node_modules.
 * P2: a loaded package is cached by name: one import per process.
 */
import { createRequire } from "node:module";
import { MissingDependencyError } from "./kernel/errors.ts";

const fromLoom = createRequire(import.meta.url);
const cache = new Map<string, Promise<unknown>>();
const syncCache = new Map<string, unknown>();

function missing(
  pkg: string,
  feature: string,
  cause: unknown,
  install = pkg,
): MissingDependencyError {
  const why = cause instanceof Error ? cause.message.split("\n")[0] : String(cause);
  return new MissingDependencyError(
    `${feature} needs the package ${install}, which is not installed: run \`npm install ${install}\` (${why})`,
    { package: install, feature },
  );
}

function isNotFound(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND";
}

/** Whether `pkg` is installed where Loom can load it (P1). */
function installed(pkg: string): boolean {
  try {
    fromLoom.resolve(pkg);
    return true;
  } catch (e) {
    // An ESM-only package has no `require` entry: it is there, just not for require.resolve.
    if ((e as { code?: unknown }).code === "ERR_PACKAGE_PATH_NOT_EXPORTED") return true;
    if (isNotFound(e)) return false;
    throw e;
  }
}

/**
 * Throws MissingDependencyError now if `pkg` is not installed (for checks at creation time).
 * `install` is the package the error tells the user to install when `pkg` is one of its
 * subpaths (default `pkg`); the same holds for `importPeer` and `requirePeer`.
 */
export function assertPeer(pkg: string, feature: string, install?: string): void {
  if (syncCache.has(pkg) || cache.has(pkg)) return;
  if (!installed(pkg)) throw missing(pkg, feature, "not found", install);
}

/** `import(pkg)` once per process (P2); MissingDependencyError when it is not installed. */
export function importPeer<T>(pkg: string, feature: string, install?: string): Promise<T> {
  let loading = cache.get(pkg);
  if (!loading) {
    loading = import(pkg).catch((e: unknown) => {
      cache.delete(pkg);
      throw isNotFound(e) ? missing(pkg, feature, e, install) : e;
    });
    cache.set(pkg, loading);
  }
  return loading as Promise<T>;
}

/** `require(pkg)` once per process (P2), for CommonJS drivers opened synchronously. */
export function requirePeer<T>(pkg: string, feature: string, install?: string): T {
  if (syncCache.has(pkg)) return syncCache.get(pkg) as T;
  let loaded: T;
  try {
    loaded = fromLoom(pkg) as T;
  } catch (e) {
    throw isNotFound(e) ? missing(pkg, feature, e, install) : e;
  }
  syncCache.set(pkg, loaded);
  return loaded;
}
