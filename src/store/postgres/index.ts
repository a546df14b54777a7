export { postgresStore, type PostgresStore, type PostgresStoreOptions } from "./postgres-store.ts";
