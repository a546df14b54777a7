#!/usr/bin/env node
// The `loom` command: the CLI built into dist/ (`npm run build`, run by `npm ci` and before
// packing). A TypeScript module the user names (`loom run flows.ts`) is loaded through tsx, an
// optional peer that the CLI registers only then (src/cli/load-module.ts). See docs/cli.md.
import process from "node:process";
import { setTimeout } from "node:timers";

let main;
try {
  ({ main } = await import("../dist/cli/main.js"));
} catch (e) {
  if (e?.code !== "ERR_MODULE_NOT_FOUND" || !String(e.message).includes("dist")) throw e;
  process.stderr.write("loom: the CLI is not built (no dist/): run `npm run build` first\n");
  process.exit(1);
}
process.exitCode = await main(process.argv.slice(2));
// The command is done and its runtime closed. A user's module may still hold the event loop
// open (a connection pool made at import time); exit anyway, after a grace period for output.
setTimeout(() => process.exit(), 1000).unref();
