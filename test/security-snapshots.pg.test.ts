/** Issue 22's forged `snapshots` row on PostgreSQL (test/support/snapshot-forgery.ts). */
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { postgresStore } from "../src/store/postgres/index.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import { snapshotForgerySuite, type SnapshotRow } from "./support/snapshot-forgery.ts";

const url = pgUrl();
const schemas: string[] = [];
let schema = schemaName("snapshots");
schemas.push(schema);
const client = new pg.Client({ connectionString: url });
beforeAll(() => client.connect());
afterAll(async () => {
  await client.end();
  await dropSchema(url, ...schemas);
});

snapshotForgerySuite({
  name: "PostgreSQL",
  async open() {
    return postgresStore({ connectionString: url, schema, pool: { max: 4 } });
  },
  async snapshotRow(id) {
    const { rows } = await client.query<{ seq: string; state: string }>(
      `SELECT seq, state FROM "${schema}".snapshots WHERE execution_id = $1`,
      [id],
    );
    const row = rows[0];
    return row && ({ seq: Number(row.seq), state: row.state } satisfies SnapshotRow);
  },
  async setSnapshotRow(id, row) {
    await client.query(
      `INSERT INTO "${schema}".snapshots (execution_id, seq, state) VALUES ($1, $2, $3)
       ON CONFLICT (execution_id) DO UPDATE SET seq = excluded.seq, state = excluded.state`,
      [id, row.seq, row.state],
    );
  },
  async reset() {
    schema = schemaName("snapshots");
    schemas.push(schema);
  },
});
