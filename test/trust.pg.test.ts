/**
 * Issue 10's acceptance on PostgreSQL (test/support/trust-suite.ts): every table of the store's
 * schema, row by row as text, is what "nowhere in the store" searches.
 */
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { postgresStore } from "../src/store/postgres/index.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import { trustSuite } from "./support/trust-suite.ts";
import { OF_EXECUTION, textRow, writeTextRow } from "./support/pg-rows.ts";

const url = pgUrl();
const schemas: string[] = [];
let schema = schemaName("trust");
schemas.push(schema);
const client = new pg.Client({ connectionString: url });
beforeAll(() => client.connect());
afterAll(async () => {
  await client.end();
  await dropSchema(url, ...schemas);
});

trustSuite({
  name: "PostgreSQL",
  async open() {
    return postgresStore({ connectionString: url, schema, pool: { max: 4 } });
  },
  row: (id, seq) => textRow(client, schema, id, seq),
  async setRow(id, seq, row) {
    await writeTextRow(client, schema, id, seq, row);
  },
  async deleteRow(id, seq) {
    await client.query(
      `DELETE FROM "${schema}".events WHERE ${OF_EXECUTION(schema)} AND seq = $2`,
      [id, seq],
    );
  },
  async dump() {
    const { rows: tables } = await client.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
      [schema],
    );
    const parts: string[] = [];
    for (const { table_name } of tables) {
      const { rows } = await client.query<{ t: string }>(
        `SELECT t::text AS t FROM "${schema}"."${table_name}" t`,
      );
      for (const r of rows) parts.push(r.t);
    }
    return Buffer.from(parts.join("\n"), "utf8");
  },
  async reset() {
    schema = schemaName("trust");
    schemas.push(schema);
  },
});
