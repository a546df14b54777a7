/**
 * The dashboard's client script (src/ui/client/, TypeScript for the browser) as one minified
 * file, served at `/assets/app.js`.
 *
 * Invariants (tests cite B1..B3):
 * B1. Run from the sources (this module is a `.ts` file: the tests, tsx, `npm run demo`), the
 *     script is bundled from the client's sources on the first request, in memory, by esbuild,
 *     so what is served is what the sources say now. esbuild is a dev dependency, imported only
 *     here and only then.
 * B2. Run from the package (dist/), the script is the file scripts/build.mjs wrote beside this
 *     module (`client/app.js`), by the same `bundleClient`: the package needs no esbuild at run
 *     time, and no CDN or network at all.
 * B3. One bundle per process: every request after the first is answered from memory.
 */
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

/** Where scripts/build.mjs writes the bundle, relative to this module in dist/. */
export const BUNDLE_FILE = "client/app.js";

/**
 * The bundle of the client whose entry module is `entry` (B1, B2): one IIFE, minified. Given
 * `outfile`, where it will be written, it comes with a source map whose sources are relative to
 * it (the package ships the client's sources that map names, and no comment in the script asks
 * a browser for the map).
 */
export async function bundleClient(
  entry: string,
  outfile?: string,
): Promise<{ js: string; map?: string }> {
  const esbuild = await import("esbuild");
  // esbuild builds in a child process of its own; stop it after, so no test or demo leaves one.
  const out = await esbuild
    .build({
      entryPoints: [entry],
      bundle: true,
      minify: true,
      format: "iife",
      target: "es2022",
      platform: "browser",
      charset: "utf8",
      legalComments: "none",
      write: false,
      logLevel: "silent",
      ...(outfile === undefined ? {} : { outfile, sourcemap: "external" as const }),
    })
    .finally(() => esbuild.stop());
  const js = out.outputFiles.find((f) => !f.path.endsWith(".map"))?.text;
  if (js === undefined) throw new Error("esbuild wrote no bundle of the dashboard's client");
  const map = out.outputFiles.find((f) => f.path.endsWith(".map"))?.text;
  return map === undefined ? { js } : { js, map };
}

let bundle: Promise<string> | undefined;

/** The client script to serve (B1..B3). */
export function clientScript(): Promise<string> {
  bundle ??= load().catch((e: unknown) => {
    bundle = undefined;
    throw e;
  });
  return bundle;
}

function load(): Promise<string> {
  if (import.meta.url.endsWith(".ts")) {
    const entry = fileURLToPath(new URL("./client/main.ts", import.meta.url));
    return bundleClient(entry).then((b) => b.js);
  }
  return readFile(new URL(`./${BUNDLE_FILE}`, import.meta.url), "utf8");
}
