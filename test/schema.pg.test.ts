/** Issue 19's Standard Schema input checks (test/support/schema-suite.ts) on PostgreSQL. */
import { afterAll } from "vitest";
import { postgresStore } from "../src/store/postgres/index.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";
import { schemaSuite } from "./support/schema-suite.ts";

const url = pgUrl();
const schemas: string[] = [];
afterAll(() => dropSchema(url, ...schemas));

schemaSuite({
  name: "PostgreSQL",
  async open() {
    const schema = schemaName("schema");
    schemas.push(schema);
    return postgresStore({ connectionString: url, schema, pool: { max: 4 } });
  },
});
