/**
 * What the PostgreSQL suites (`*.pg.test.ts`, collected only when LOOM_PG_URL is set: see
 * vitest.config.ts) share: the server's URL, and a fresh schema per store they open.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

export function pgUrl(): string {
  const url = process.env.LOOM_PG_URL;
  if (!url)
    throw new Error("LOOM_PG_URL is not set (vitest.config.ts collects *.pg.test.ts only with it)");
  return url;
}

/** A new, unused schema name (`loom_<what>_<random>`). */
export function schemaName(what: string): string {
  return `loom_${what}_${randomBytes(5).toString("hex")}`;
}

/** Drops each of `schemas` and everything in it. */
export async function dropSchema(url: string, ...schemas: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
