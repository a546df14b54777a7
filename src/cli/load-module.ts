/**
 * Loads a user's module and finds its flows.
 *
 * The module path is resolved against the working directory and imported by file URL. A
 * TypeScript module is loaded through tsx, an optional peer registered only when one is named:
 * a JavaScript module needs nothing beyond Node. Its flows are the named exports that are flows,
 * plus a default export that is a flow or an array of flows.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { isFlow, type Flow } from "../runtime/flow.ts";
import { importPeer } from "../peers.ts";
import { CliError, errorLine } from "./cli-error.ts";

export interface LoadedModule {
  path: string;
  flows: Flow[];
}

export async function loadFlows(specifier: string, cwd: string): Promise<LoadedModule> {
  const path = resolve(cwd, specifier);
  if (!existsSync(path)) {
    throw new CliError(`cannot find module ${JSON.stringify(specifier)} (no file at ${path})`);
  }
  if (TYPESCRIPT.test(path)) await registerTypeScript();
  let namespace: Record<string, unknown>;
  try {
    namespace = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (e) {
    throw new CliError(`cannot load module ${JSON.stringify(specifier)}: ${errorLine(e)}`);
  }
  const flows = flowsOf(namespace);
  if (flows.length === 0) {
    throw new CliError(
      `module ${JSON.stringify(specifier)} exports no flows (export flows made with flow$, or a default array of them)`,
    );
  }
  return { path, flows };
}

/** The flows among a module's exports, each once, in export order. */
export function flowsOf(namespace: Record<string, unknown>): Flow[] {
  const found = new Set<Flow>();
  for (const [key, value] of Object.entries(namespace)) {
    if (isFlow(value)) found.add(value);
    else if (key === "default" && Array.isArray(value)) {
      for (const item of value as unknown[]) if (isFlow(item)) found.add(item);
    }
  }
  return [...found];
}

const TYPESCRIPT = /\.(?:ts|mts|cts|tsx)$/;
let registered: Promise<void> | undefined;

/**
 * Registers tsx's two hooks, as the tsx command does: a .ts module outside a `"type": "module"`
 * package is CommonJS to Node, and only the CommonJS hook can load it. Once per process.
 */
function registerTypeScript(): Promise<void> {
  registered ??= (async () => {
    const feature = "loading a TypeScript module (loom run/worker/fork/serve with a .ts file)";
    const esm = await importPeer<{ register(): unknown }>("tsx/esm/api", feature, "tsx");
    const cjs = await importPeer<{ register(): unknown }>("tsx/cjs/api", feature, "tsx");
    esm.register();
    cjs.register();
  })();
  return registered;
}
