#!/usr/bin/env node
// The package build (`npm run build`, run by `prepare` and `prepack`): ESM JavaScript, `.d.ts`
// and their maps from src/ into dist/, by TypeScript itself (tsconfig.build.json).
//
// The sources import each other with `.ts` specifiers, which `rewriteRelativeImportExtensions`
// turns into `.js` in the emitted JavaScript but not in declarations (TypeScript #61037). A
// declaration that names `./x.ts` needs `allowImportingTsExtensions` in the user's tsconfig
// with some tools, so the last step rewrites every relative `.ts` specifier in dist/**/*.d.ts
// to `.js`, and then refuses to finish if one is left.
//
// The dashboard's browser client (src/ui/client/, TypeScript with the DOM) is not compiled by
// tsc into modules: it is bundled and minified into one file, dist/ui/client/app.js, by the
// same function the server uses when it runs from the sources (src/ui/bundle.ts B2), taken
// from the JavaScript tsc just emitted.
//
// It builds into dist.next/ and swaps it in only when everything succeeded, so a type error in
// src/ leaves the last good dist/ in place (and no dist/.built is written for a broken build).
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist.next");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json"), "--outDir", dist], {
  cwd: root,
  stdio: "inherit",
});

const RELATIVE_TS = /((?:from|import)\s*\(?\s*)(["'])(\.{1,2}\/[^"']+)\.ts\2/g;
let rewritten = 0;
for (const file of walk(dist)) {
  if (!file.endsWith(".d.ts")) continue;
  const text = readFileSync(file, "utf8");
  const next = text.replace(RELATIVE_TS, (_m, lead, q, path) => `${lead}${q}${path}.js${q}`);
  if (next !== text) {
    writeFileSync(file, next);
    rewritten += 1;
  }
  if (RELATIVE_TS.test(next)) throw new Error(`build: ${file} still imports a .ts file`);
}
const { bundleClient, BUNDLE_FILE } = await import(
  pathToFileURL(join(dist, "ui", "bundle.js")).href
);
// The map's sources are relative to where the package keeps the bundle: dist/, not dist.next/.
const client = await bundleClient(
  join(root, "src", "ui", "client", "main.ts"),
  join(root, "dist", "ui", BUNDLE_FILE),
);
const bundlePath = join(dist, "ui", BUNDLE_FILE);
mkdirSync(dirname(bundlePath), { recursive: true });
writeFileSync(bundlePath, client.js);
writeFileSync(`${bundlePath}.map`, client.map);
writeFileSync(join(dist, ".built"), `${new Date().toISOString()}\n`);
rmSync(join(root, "dist"), { recursive: true, force: true });
renameSync(dist, join(root, "dist"));
process.stdout.write(
  `build: dist/ written, ${rewritten} declaration files rewritten to .js, ` +
    `dashboard client ${Buffer.byteLength(client.js)} bytes\n`,
);

function* walk(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else yield path;
  }
}
