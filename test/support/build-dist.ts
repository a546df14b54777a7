/**
 * vitest's global setup: the `loom` command runs from the built package (bin/loom.js loads
 * dist/), so the CLI's end-to-end tests build dist/ first when any file under src/ is newer than
 * the last build (scripts/build.mjs writes dist/.built last).
 */
import { execFileSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));

function newestMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMs(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function builtMs(): number {
  try {
    return statSync(join(root, "dist", ".built")).mtimeMs;
  } catch {
    return 0;
  }
}

export default function setup(): void {
  const inputs = Math.max(
    newestMs(join(root, "src")),
    statSync(join(root, "tsconfig.json")).mtimeMs,
    statSync(join(root, "tsconfig.build.json")).mtimeMs,
  );
  if (builtMs() >= inputs) return;
  execFileSync(process.execPath, [join(root, "scripts", "build.mjs")], {
    cwd: root,
    stdio: ["ignore", "ignore", "inherit"],
  });
}
