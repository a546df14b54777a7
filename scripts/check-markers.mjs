#!/usr/bin/env node
// The merge check of `npm run structure`: no file holds a merge's conflict markers. Two merges
// once committed them inside comments, where neither the compiler nor the tests look, and the
// formatter had turned one `>>>>>>>` into `> > > > > > >` (a Markdown quote), so both spellings
// count.
//
// `node scripts/check-markers.mjs [DIR]` scans the files git tracks (or, given DIR, every file
// under it), prints each marker as file:line and exits 1 when there is one.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

// (`=======` alone is also a Markdown heading's underline: the two ends of a conflict suffice.)
const MARKER = /^\s*(?:<{7}(?:\s|$)|>{7}(?:\s|$)|(?:> ){6}>(?:\s|$))/;

function filesUnder(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === "node_modules" || entry.name === ".git") return [];
    const path = join(dir, entry.name);
    return entry.isDirectory() ? filesUnder(path) : [path];
  });
}

/** Each conflict marker in the files, as `file:line`. */
export function markers(files, base = process.cwd()) {
  const found = [];
  for (const file of files) {
    if (!existsSync(file)) continue; // tracked, deleted in the work tree
    const bytes = readFileSync(file);
    if (bytes.includes(0)) continue; // binary
    const lines = bytes.toString("utf8").split("\n");
    lines.forEach((line, i) => {
      if (MARKER.test(line)) found.push(`${relative(base, file)}:${i + 1}`);
    });
  }
  return found;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dir = process.argv[2];
  const files = dir
    ? filesUnder(dir)
    : execFileSync("git", ["ls-files", "-z"], { encoding: "utf8" }).split("\0").filter(Boolean);
  const found = markers(files, dir ?? process.cwd());
  for (const at of found) process.stderr.write(`conflict marker at ${at}\n`);
  if (found.length > 0) process.exit(1);
  process.stdout.write(`structure: no conflict marker in ${files.length} files\n`);
}
