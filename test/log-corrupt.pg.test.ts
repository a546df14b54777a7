/** Issue 21 item 3 on PostgreSQL (test/support/log-corrupt-suite.ts): a row spoiled in a schema. */
import pg from "pg";
import { postgresStore } from "../src/store/postgres/index.ts";
import { logCorruptSuite } from "./support/log-corrupt-suite.ts";
import { OF_EXECUTION } from "./support/pg-rows.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

logCorruptSuite("PostgreSQL", async () => {
  const url = pgUrl();
  const schema = schemaName("corrupt");
  const store = await postgresStore({ connectionString: url, schema });
  return {
    store,
    flags: ["--pg", url, "--pg-schema", schema],
    async spoil(id, seq) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rowCount } = await client.query(
          `UPDATE "${schema}".events SET payload = '{not json' WHERE ${OF_EXECUTION(schema)} AND seq = $2`,
          [id, seq],
        );
        if (rowCount !== 1) throw new Error(`spoiled ${rowCount} rows`);
      } finally {
        await client.end();
      }
    },
    async dispose() {
      await store.close();
      await dropSchema(url, schema);
    },
  };
});
