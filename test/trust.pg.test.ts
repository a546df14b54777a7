/**
 * Issue 10's acceptance on PostgreSQL (test/support/trust-suite.ts): every table of the store's
 * schema, row by row as text, is what "nowhere in the store" searches.
 */
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { postgresStore } from "../src/store/postgres/index.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import { trustSuite, type RawRow } from "./support/trust-suite.ts";

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
  async row(id, seq) {
    const { rows } = await client.query<RawRow & { at: string }>(
      `SELECT kind, at, payload, meta FROM "${schema}".events WHERE execution_id = $1 AND seq = $2`,
      [id, seq],
    );
    const row = rows[0];
    return row && { ...row, at: Number(row.at) };
  },
  async setRow(id, seq, row) {
    await client.query(
      `UPDATE "${schema}".events SET kind = $3, at = $4, payload = $5, meta = $6
       WHERE execution_id = $1 AND seq = $2`,
      [id, seq, row.kind, row.at, row.payload, row.meta],
    );
  },
  async deleteRow(id, seq) {
    await client.query(`DELETE FROM "${schema}".events WHERE execution_id = $1 AND seq = $2`, [
      id,
      seq,
    ]);
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
