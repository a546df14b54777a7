/**
 * PostgreSQL's `destroyKey` (S19, src/store/postgres/keys.ts K2) leaves no copy of the material in
 * the keys table's files: after a CHECKPOINT (which writes every changed page to its file) the
 * server reads the table's file back (`pg_read_binary_file`, a superuser's: the suites' role is)
 * and it is searched for the material, before (where it must be found, or the search proves
 * nothing) and after.
 *
 * Why this check is sound and not flaky: a deleted row's bytes go only once no transaction that
 * might still see it runs. The destroy waits for the transactions older than its delete, in any
 * database (keys.ts K3; the second test holds one open to show it); a snapshot held by a reader in
 * the table's own database it cannot see, so the suite makes a database of its own, where only its
 * own connections run, and the other suites, in parallel on the shared test database, hold none.
 * The row destroyed is the one put last: the row a plain VACUUM prunes but leaves in the page's
 * free space, since no live row moves over it (keys.ts K2 says why the store rewrites the table).
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresStore } from "../src/store/postgres/index.ts";
import type { KeyDestruction } from "../src/store/spi.ts";
import { until } from "./helpers.ts";
import { pgUrl } from "./support/postgres.ts";

const url = pgUrl();
const database = `loom_keys_${randomBytes(5).toString("hex")}`;
const isolated = (() => {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
})();

async function withClient<T>(connectionString: string, fn: (c: pg.Client) => Promise<T>) {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

beforeAll(() => withClient(url, (c) => c.query(`CREATE DATABASE "${database}"`)));
afterAll(() =>
  withClient(url, (c) => c.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)),
);

/** A material no other byte sequence in the file could match by chance. */
const secret = () => `secret-${randomBytes(16).toString("hex")}`;

/** The keys table's file (or the file at `path`), searched for each material, once written. */
async function search(
  admin: pg.Client,
  table: string,
  materials: readonly string[],
  path?: string,
) {
  await admin.query("CHECKPOINT");
  const { rows } = await admin.query<{ path: string; found: number[] | null }>(
    `SELECT f.path, (SELECT array_agg(position(convert_to(m, 'UTF8') IN f.bytes) ORDER BY o)
       FROM unnest($1::text[]) WITH ORDINALITY AS x(m, o)) AS found
     FROM (SELECT q.path,
             pg_read_binary_file(q.path, 0, (pg_stat_file(q.path, true)).size, true) AS bytes
           FROM (SELECT coalesce($2::text, pg_relation_filepath($3::regclass)) AS path) AS q
          ) AS f`,
    [materials, path ?? null, table],
  );
  const row = rows[0];
  if (!row) throw new Error("the file search returned no row");
  // A file the rewrite removed has no size and reads as NULL, so nothing is found in it.
  return { path: row.path, found: (row.found ?? []).map((at) => (at ?? 0) > 0) };
}

describe("postgres: destroyKey leaves no trace in the table's files (S19)", () => {
  it("the material is in the keys table's file before, and in none of its files after", async () => {
    const store = await postgresStore({ connectionString: isolated, schema: "loom" });
    const admin = new pg.Client({ connectionString: isolated });
    await admin.connect();
    try {
      const table = `"${store.schema}".keys`;
      const neighbours = Array.from({ length: 5 }, () => secret());
      for (const [i, m] of neighbours.entries()) await store.putKey(`subject:n${i}`, m);
      const material = secret();
      await store.putKey("subject:target", material);
      const before = await search(admin, table, [material, ...neighbours]);
      expect(before.found).toEqual([true, ...neighbours.map(() => true)]);

      expect(await store.destroyKey("subject:target")).toEqual({ existed: true });
      const after = await search(admin, table, [material, ...neighbours]);
      // Found in neither the file the table lives in now nor the one it lived in before.
      expect(after.found).toEqual([false, ...neighbours.map(() => true)]);
      const old = await search(admin, table, [material], before.path);
      expect(old.found).toEqual([false]);
      expect(await store.getKey("subject:target")).toBeUndefined();
      expect(await store.listKeys("subject:")).toEqual(neighbours.map((_, i) => `subject:n${i}`));
    } finally {
      await admin.end();
      await store.close();
    }
  });

  it("waits for a transaction older than the delete, even in another database, then scrubs", async () => {
    const store = await postgresStore({ connectionString: isolated, schema: "loom_wait" });
    const admin = new pg.Client({ connectionString: isolated });
    // In the shared database: it bounds the rewrite's snapshot all the same (keys.ts K3).
    const holder = new pg.Client({ connectionString: url });
    await Promise.all([admin.connect(), holder.connect()]);
    let destroying: Promise<KeyDestruction> | undefined;
    try {
      const table = `"${store.schema}".keys`;
      const material = secret();
      await store.putKey("subject:target", material);
      await holder.query("BEGIN");
      await holder.query("SELECT pg_current_xact_id()");
      let settled = false;
      destroying = store.destroyKey("subject:target");
      void destroying.finally(() => (settled = true));
      // The delete is done at once (no reader sees the key), the rewrite waits for the holder.
      await until(async () => (await store.getKey("subject:target")) === undefined);
      await new Promise((r) => setTimeout(r, 300));
      expect(settled).toBe(false);
      await holder.query("COMMIT");
      expect(await destroying).toEqual({ existed: true });
      expect((await search(admin, table, [material])).found).toEqual([false]);
    } finally {
      await holder.query("ROLLBACK").catch(() => undefined);
      await destroying?.catch(() => undefined);
      await Promise.all([admin.end(), holder.end()]);
      await store.close();
    }
  });
});
