/**
 * Loads a user's module and finds its flows.
 *
 * The module path is resolved against the working directory and imported by file URL, so a
 * TypeScript module works as well as JavaScript (bin/loom.js registers tsx first). Its flows are
 * the named exports that are flows, plus a default export that is a flow or an array of flows.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { isFlow, type Flow } from "../runtime/flow.ts";
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
