import { defineConfig } from "vitest/config";

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

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: pg ? [] : ["test/**/*.pg.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
