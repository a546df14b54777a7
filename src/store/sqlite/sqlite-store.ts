/**
 * The embedded store: every SPI on one SQLite file through better-sqlite3, in WAL mode.
 *
 * Several processes may open the same file. Every write runs in a `BEGIN IMMEDIATE`
 * transaction, so writers are serialised by SQLite's lock (waiting up to `busyTimeoutMs`), and
 * the fence and sequence checks run inside the transaction that appends (S2, S3).
 * `synchronous` defaults to FULL: a committed append survives a power loss, not only a crash of
 * the process. NORMAL survives `kill -9` and is faster; choose it knowingly.
 *
 * The store is assembled here from its parts, split as the SPI's groups are (as the PostgreSQL
 * store is), over one connection and its prepared statements (statements.ts Q1, Q2): appends
 * (append.ts A1..A3, hot-events.ts H1, H2), reads, snapshots, leases, timers, schedules and
 * notices, the inbox, keys (keys.ts K1..K3), retention, forks and members (records.ts),
 * queues (queues.ts) and rate limiters (limiters.ts).
 */
import type Database from "better-sqlite3";
import { InvalidInputError } from "../../kernel/errors.ts";
import { requirePeer } from "../../peers.ts";
import type { Store, StoreHooks } from "../spi.ts";
import { sqliteAppend } from "./append.ts";
import { sqliteInbox } from "./inbox.ts";
import { sqliteKeys } from "./keys.ts";
import { sqliteLeases } from "./leases.ts";
import { sqliteLimiters } from "./limiters.ts";
import { MIGRATIONS } from "./migrations.ts";
import { sqliteQueues } from "./queues.ts";
import { sqliteReads } from "./reads.ts";
import { sqliteRecords } from "./records.ts";
import { sqliteRetention } from "./retention.ts";
import { sqliteSchedules } from "./schedules.ts";
import { sqliteSnapshots } from "./snapshots.ts";
import { headOf, prepareStatements } from "./statements.ts";
import { sqliteTimers } from "./timers.ts";

export interface SqliteStoreOptions {
  synchronous?: "FULL" | "NORMAL";
  busyTimeoutMs?: number;
  hooks?: StoreHooks;
}

export function sqliteStore(path: string, options: SqliteStoreOptions = {}): Store {
  if (typeof path !== "string" || path === "") {
    throw new InvalidInputError(
      `sqliteStore takes the database file's path as a string (":memory:" for one in memory), got ${path === "" ? "an empty string" : typeof path}`,
    );
  }
  const db = new (requirePeer<typeof Database>("better-sqlite3", "loomwork/sqlite"))(path);
  db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 10_000}`);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${options.synchronous ?? "FULL"}`);
  migrate(db);
  const q = prepareStatements(db);
  const { appendMany, forget } = sqliteAppend(db, q, options.hooks ?? {});

  return {
    kind: "sqlite",
    appendMany,
    ...sqliteReads(db, q),
    ...sqliteSnapshots(q),
    ...sqliteLeases(db, q, forget),
    ...sqliteTimers(q),
    ...sqliteSchedules(q),
    ...sqliteInbox(db),
    ...sqliteKeys(db),
    ...sqliteRetention(db, headOf, forget),
    ...sqliteRecords(db),
    ...sqliteQueues(db, forget),
    ...sqliteLimiters(db),

    async close() {
      if (db.open) db.close();
    },
  };
}

function migrate(db: Database.Database): void {
  db.transaction(() => {
    const version = db.pragma("user_version", { simple: true }) as number;
    MIGRATIONS.slice(version).forEach((sql, i) => {
      db.exec(sql);
      db.pragma(`user_version = ${version + i + 1}`);
    });
  }).immediate();
}
