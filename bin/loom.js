#!/usr/bin/env node
// The `loom` command. Plain JavaScript, so it runs from a fresh clone (`npx loom`,
// `node bin/loom.js`) with no build step: it registers tsx, which then compiles
// the TypeScript CLI and any TypeScript module the user names. See docs/cli.md.
import process from "node:process";
import { setTimeout } from "node:timers";
import { register as registerCjs } from "tsx/cjs/api";
import { register } from "tsx/esm/api";

// Both hooks, as the tsx command registers them: a .ts module outside a `"type": "module"`
// package is CommonJS to Node, and only the CommonJS hook can load it.
register();
registerCjs();
const { main } = await import("../src/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
// The command is done and its runtime closed. A user's module may still hold the event loop
// open (a connection pool made at import time); exit anyway, after a grace period for output.
setTimeout(() => process.exit(), 1000).unref();
