/**
 * The shared store: every SPI on PostgreSQL through `pg`, for a fleet of processes on many
 * machines (issue 9), plus what a fleet adds (`FleetStore`: claims, S17, and wakes, S18).
 *
 * P1. Every table lives in one schema (`loom` by default), created and migrated when the store
 *     opens (migrations.ts M1..M3): many stores, even many Looms, can share one database.
 * P2. Every write that must be atomic is one transaction or one statement; the fence and the
 *     sequence number are checked in the transaction that appends, which is one statement, a call
 *     of the append routine (append.ts A1..A5, append-routine.ts R1..R6).
 * P3. Payloads, metas, snapshots and inputs are stored as the JSON text the runtime made
 *     (`text`, not `jsonb`, which would reorder keys and refuse a `\u0000`), so they read back
 *     as appended.
 * P4. `close()` stops listening, then ends the pool; a store is not used after it.
 *
 * @example
 * const store = await postgresStore({ connectionString: process.env.DATABASE_URL ?? "" });
 * const runtime = createRuntime({ store });
 */
import { InvalidInputError } from "../../kernel/errors.ts";
import type { FleetStore, Store, StoreHooks } from "../spi.ts";
import { postgresAppend } from "./append.ts";
import { newPool, tables } from "./db.ts";
import { postgresInbox } from "./inbox.ts";
import { postgresKeys } from "./keys.ts";
import { postgresLeases } from "./leases.ts";
import { postgresLimiters } from "./limiters.ts";
import { migrate } from "./migrations.ts";
import { postgresQueues } from "./queues.ts";
import { postgresReads } from "./reads.ts";
import { postgresRecords } from "./records.ts";
import { postgresRetention } from "./retention.ts";
import { postgresSchedules } from "./schedules.ts";
import { postgresSnapshots } from "./snapshots.ts";
import { postgresTimers } from "./timers.ts";
import { WakeListener, wakeChannel } from "./wakes.ts";

export interface PostgresStoreOptions {
  /** A libpq-style URL: `postgres://user:password@host:5432/database`. */
  connectionString: string;
  /** Lower-case letters, digits and `_`, at most 48 characters; `loom` by default. */
  schema?: string;
  pool?: {
    /** Connections the store opens at most (the listening one aside); 10 by default. */
    max?: number;
  };
  /**
   * How long destroying a key (eraseSubject) waits for the readers that may still see it before
   * it reports the scrub unconfirmed (keys.ts K3, K5); 30 000 by default.
   */
  keyScrubWaitMs?: number;
  /** Test hooks (the conformance suite's fault injection). */
  hooks?: StoreHooks;
}

export interface PostgresStore extends Store, FleetStore {
  readonly kind: "postgres";
  /** The schema the store's tables live in. */
  readonly schema: string;
}

const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,47}$/;

export async function postgresStore(options: PostgresStoreOptions): Promise<PostgresStore> {
  const { connectionString, schema, max } = checkOptions(options);
  const pool = newPool(connectionString, max);
  try {
    const client = await pool.connect();
    try {
      await migrate(client, schema);
    } finally {
      client.release();
    }
  } catch (e) {
    await pool.end().catch(() => {});
    throw e;
  }
  const t = tables(schema);
  const channel = wakeChannel(schema);
  const listener = new WakeListener(connectionString, channel);
  let closing: Promise<void> | undefined;

  return {
    kind: "postgres",
    schema,
    appendMany: postgresAppend(pool, t, channel, options.hooks ?? {}),
    ...postgresReads(pool, t),
    ...postgresSnapshots(pool, t),
    ...postgresLeases(pool, t, channel),
    ...postgresTimers(pool, t, channel),
    ...postgresSchedules(pool, t),
    ...postgresInbox(pool, t, channel),
    ...postgresRetention(pool, t),
    ...postgresKeys(pool, t, options.keyScrubWaitMs),
    ...postgresRecords(pool, t),
    ...postgresQueues(pool, t, schema),
    ...postgresLimiters(pool, t, schema),
    listen: (onWake) => listener.subscribe(onWake),
    close() {
      closing ??= listener.close().then(() => pool.end());
      return closing;
    },
  };
}

function checkOptions(options: PostgresStoreOptions): {
  connectionString: string;
  schema: string;
  max: number;
} {
  const { connectionString, schema = "loom" } = options;
  if (typeof connectionString !== "string" || connectionString.length === 0) {
    throw new InvalidInputError("postgresStore: connectionString must be a non-empty string");
  }
  if (typeof schema !== "string" || !SCHEMA_PATTERN.test(schema)) {
    throw new InvalidInputError(
      `postgresStore: schema ${JSON.stringify(schema)} must be 1..48 lower-case letters, digits and _, not starting with a digit`,
      { schema: String(schema) },
    );
  }
  const max = options.pool?.max ?? 10;
  if (!Number.isSafeInteger(max) || max < 1) {
    throw new InvalidInputError(`postgresStore: pool.max must be a positive integer, got ${max}`, {
      max: String(max),
    });
  }
  const wait = options.keyScrubWaitMs;
  if (wait !== undefined && !(Number.isSafeInteger(wait) && wait >= 0)) {
    throw new InvalidInputError(
      `postgresStore: keyScrubWaitMs must be a non-negative integer, got ${wait}`,
      { keyScrubWaitMs: String(wait) },
    );
  }
  return { connectionString, schema, max };
}
