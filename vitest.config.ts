import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { slow } from "./test/support/slowdown.ts";

/**
 * The PostgreSQL suites (`*.pg.test.ts`) need a server: LOOM_PG_URL names it (.ci/run sets it).
 * Without one they are not collected at all, and one line says so.
 */
const pg = process.env.LOOM_PG_URL;
if (!pg) {
  process.stderr.write(
    "loom: LOOM_PG_URL is not set; the PostgreSQL suites (test/*.pg.test.ts) do not run\n",
  );
}

/**
 * `loomwork` and its subpaths resolve to the sources in this repository's own tests, as in
 * tsconfig.json's `paths`: a test and the example it imports share one copy of Loom. (A child
 * process started by a test, such as the `loom` command, resolves them to the built dist/.)
 */
const pkg = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")) as {
  exports: Record<string, string | { default: string }>;
};
const aliases = Object.entries(pkg.exports).flatMap(([sub, target]) =>
  typeof target === "string"
    ? []
    : [
        {
          find: new RegExp(`^${sub.replace(/^\./, "loomwork")}$`),
          replacement: fileURLToPath(
            new URL(target.default.replace(/^\.\/dist\/(.*)\.js$/, "./src/$1.ts"), import.meta.url),
          ),
        },
      ],
);

export default defineConfig({
  resolve: {
    alias: aliases,
  },
  test: {
    include: ["test/**/*.test.ts"],
    exclude: pg ? [] : ["test/**/*.pg.test.ts"],
    // Scaled by LOOM_TEST_SLOWDOWN, as every wait inside a test is (test/support/slowdown.ts).
    testTimeout: slow(60_000),
    hookTimeout: slow(60_000),
    teardownTimeout: slow(60_000),
    pool: "forks",
    // kill-children.ts ends every process a test started, even one whose test failed.
    globalSetup: ["test/support/build-dist.ts", "test/support/kill-children.ts"],
  },
});
