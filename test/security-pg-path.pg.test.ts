/**
 * Issue 22 item 9, written as the exploit: the PL/pgSQL append routine resolved its functions
 * through the caller's `search_path`, so whoever can create a function in a schema on a
 * session's path (PostgreSQL's classic CVE-2018-1058 shape: an overload that matches the
 * arguments more exactly than pg_catalog's) ran code inside every append, and the migration
 * lock taken when a store opens did too. The routine pins its own path (append-routine.ts R7)
 * and the lock names pg_catalog's functions: the same session opens and appends without
 * calling the attacker's code.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, flow$ } from "../src/index.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

const url = pgUrl();
const evil = schemaName("evil");
const schema = schemaName("path");
const admin = new pg.Client({ connectionString: url });

beforeAll(async () => {
  await admin.connect();
  await admin.query(`CREATE SCHEMA "${evil}"`);
  await admin.query(`CREATE TABLE "${evil}".calls (fn text NOT NULL)`);
  // Exact matches for the argument types the routine passes, so each beats pg_catalog's
  // polymorphic function; each answers as pg_catalog's would, and leaves a trace.
  await admin.query(`CREATE FUNCTION "${evil}".cardinality(text[]) RETURNS int LANGUAGE sql AS $$
    INSERT INTO "${evil}".calls VALUES ('cardinality');
    SELECT coalesce(array_length($1, 1), 0) $$`);
  await admin.query(`CREATE FUNCTION "${evil}".array_position(text[], text) RETURNS int
    LANGUAGE sql AS $$
    INSERT INTO "${evil}".calls VALUES ('array_position');
    SELECT i FROM generate_subscripts($1, 1) AS i WHERE $1[i] = $2 ORDER BY i LIMIT 1 $$`);
  // Opening the store takes its migration lock with `hashtextextended($1, 0)`: 0 is an integer.
  await admin.query(`CREATE FUNCTION "${evil}".hashtextextended(text, integer) RETURNS bigint
    LANGUAGE sql AS $$
    INSERT INTO "${evil}".calls VALUES ('hashtextextended');
    SELECT pg_catalog.hashtextextended($1, $2) $$`);
});

afterAll(async () => {
  await admin.end();
  await dropSchema(url, evil, schema);
});

/** The URL of a session whose search_path puts the attacker's schema first. */
function hijacked(): string {
  const u = new URL(url);
  u.searchParams.set("options", `-c search_path="${evil}",public`);
  return u.toString();
}

describe("the append routine's search_path (append-routine.ts R7)", () => {
  it("an overload in a schema earlier on the session's search_path is never called by an open or an append", async () => {
    const store = await postgresStore({ connectionString: hijacked(), schema, pool: { max: 2 } });
    const runtime = createRuntime({ store });
    try {
      const f = flow$("pinned", async (ctx) => {
        const a = await ctx.run("a", () => 1);
        // Two branches whose steps complete together: a call for several executions' path too.
        const rest = await ctx.parallel([(b) => b.run("b", () => 2), (c) => c.run("c", () => 3)]);
        return rest.reduce((sum, x) => sum + x, a);
      });
      runtime.registerFlow(f);
      const ids = ["p-1", "p-2", "p-3"];
      const handles = await Promise.all(ids.map((id) => runtime.start(f, null, { id })));
      const ends = await Promise.all(handles.map((h) => h.result()));
      expect(ends).toEqual(ids.map(() => ({ status: "completed", output: 6 })));
    } finally {
      await runtime.close();
    }
    const { rows } = await admin.query<{ fn: string }>(`SELECT fn FROM "${evil}".calls`);
    expect(rows).toEqual([]);
  });

  it("the attacker's function is reachable from that session, so the test can fail", async () => {
    await admin.query(`DELETE FROM "${evil}".calls`);
    const client = new pg.Client({ connectionString: hijacked() });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>(
        "SELECT cardinality(ARRAY['a', 'b']::text[]) AS n",
      );
      expect(rows).toEqual([{ n: 2 }]);
    } finally {
      await client.end();
    }
    const { rows } = await admin.query<{ fn: string }>(`SELECT fn FROM "${evil}".calls`);
    expect(rows).toEqual([{ fn: "cardinality" }]);
  });
});
