export { sqliteStore, type SqliteStoreOptions } from "./sqlite-store.ts";
