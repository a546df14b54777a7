#!/usr/bin/env node
// The structure check of `npm run verify` (issue 24): no import circle among the modules of a
// source folder. Every relative import counts, `import type` included: a circle of types is
// still a circle a reader has to hold in their head. (File and function sizes are ESLint's
// max-lines and max-lines-per-function, in eslint.config.js.)
//
// `node scripts/check-structure.mjs [DIR]` (default src/) prints each circle as a chain of files
// and exits 1 when there is one.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

export function sourceFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|mts)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** The relative imports of each file, resolved to files of the set. */
export function importGraph(files) {
  const known = new Set(files);
  const graph = new Map();
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    const targets = new Set();
    for (const m of text.matchAll(IMPORT)) {
      const target = resolve(dirname(file), m[1] ?? m[2]);
      if (known.has(target)) targets.add(target);
    }
    graph.set(file, [...targets]);
  }
  return graph;
}

/** The strongly connected components of more than one file (or a file importing itself). */
export function circles(graph) {
  let index = 0;
  const indexOf = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  const visit = (v) => {
    indexOf.set(v, index);
    low.set(v, index);
    index += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indexOf.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v), indexOf.get(w)));
      }
    }
    if (low.get(v) === indexOf.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indexOf.has(v)) visit(v);
  return found;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dir = resolve(process.argv[2] ?? "src");
  const found = circles(importGraph(sourceFiles(dir)));
  for (const component of found) {
    const names = component.map((f) => relative(dir, f));
    process.stderr.write(`import circle of ${names.length} files: ${names.join(", ")}\n`);
  }
  if (found.length > 0) process.exit(1);
  process.stdout.write(`structure: no import circle in ${relative(process.cwd(), dir) || "."}\n`);
}
