/**
 * The connection layer of the PostgreSQL store: the pool, the schema's table names, statements,
 * and transactions.
 *
 * D1. BIGINT columns (times, sequence numbers, fences) read back as JS numbers: every value the
 *     store writes to one is a safe integer, checked before it is sent.
 * D2. A transaction PostgreSQL aborted to break a deadlock (or a serialisation failure) committed
 *     nothing, so `transaction` runs it again, from the start, a bounded number of times; so does
 *     `runRetried` a statement that is a transaction of its own (autocommit).
 * D3. A value PostgreSQL refuses (a NUL character in text, a number that is no BIGINT) is bad
 *     input: it surfaces as InvalidInputError, not as a driver error.
 * D4. Transactions pipeline their statements (see `transaction`).
 * D5. A transaction left open by a process that stalled (paused, or its event loop starved) holds
 *     its row locks, so appends to those executions wait and claims pass them over; the server
 *     ends such a session after IDLE_IN_TRANSACTION_MS, and what it had not committed is gone.
 */
import type pg from "pg";
import { pgDriver } from "./driver.ts";
import { InvalidInputError } from "../../kernel/errors.ts";

export type Queryable = pg.Pool | pg.PoolClient;

const INT8_OID = 20;
const TRANSACTION_ATTEMPTS = 5;
/** D5: far longer than any gap between two statements of a store's transaction. */
const IDLE_IN_TRANSACTION_MS = 60_000;
/** deadlock_detected, serialization_failure: PostgreSQL rolled the transaction back whole. */
const RETRIED_CODES = new Set(["40P01", "40001"]);
/** Values PostgreSQL could not take: a NUL in text, malformed or out-of-range numbers. */
const INPUT_CODES = new Set(["22021", "22P05", "22P02", "22003"]);

function parseInt8(value: string): number {
  return Number(value);
}

/** D1: int8 as number; every other type as pg parses it by default. */
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID && format !== "binary"
      ? parseInt8
      : (pgDriver().types.getTypeParser(oid, format) as (
          value: string,
        ) => unknown)) as pg.CustomTypesConfig["getTypeParser"],
};

export function newPool(connectionString: string, max: number): pg.Pool {
  const pool = new (pgDriver().Pool)({
    connectionString,
    max,
    types,
    pipeline: true,
    idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS,
  });
  // An idle connection that fails (the server restarted) is dropped by the pool; without a
  // listener the 'error' event would end the process.
  pool.on("error", () => {});
  return pool;
}

export { tables, type Tables } from "./tables.ts";

/**
 * A statement with a fixed text, prepared once per connection under its name (the pool's
 * connections each keep their own prepared statements).
 */
export type Statement = (values: unknown[]) => pg.QueryConfig<unknown[]>;

export function statement(name: string, text: string): Statement {
  return (values) => ({ name: `loom_${name}`, text, values });
}

/** Runs one statement (D3). */
export async function run<R extends pg.QueryResultRow>(
  db: Queryable,
  query: pg.QueryConfig<unknown[]>,
): Promise<pg.QueryResult<R>> {
  try {
    return await db.query<R>(query);
  } catch (e) {
    throw asInputError(e);
  }
}

/** Runs one statement that is a transaction of its own, again when PostgreSQL aborted it (D2). */
export async function runRetried<R extends pg.QueryResultRow>(
  db: pg.Pool,
  query: pg.QueryConfig<unknown[]>,
): Promise<pg.QueryResult<R>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.query<R>(query);
    } catch (e) {
      if (attempt < TRANSACTION_ATTEMPTS && RETRIED_CODES.has(pgCode(e) ?? "")) continue;
      throw asInputError(e);
    }
  }
}

/** A transaction in progress: what `transaction` gives the function it runs. */
export interface Tx {
  /**
   * Sends a statement and waits for its answer, and for those of every statement sent before it
   * (the first of which is BEGIN): a failure among them surfaces here.
   */
  query<R extends pg.QueryResultRow>(query: pg.QueryConfig<unknown[]>): Promise<pg.QueryResult<R>>;
  /** Sends a statement without waiting: its answer is checked with the commit's (D4). */
  send(query: pg.QueryConfig<unknown[]>): void;
}

/**
 * Runs `fn` in one transaction on one connection, again when PostgreSQL aborted it (D2, D3).
 * D4. The connection pipelines: BEGIN goes out with `fn`'s first statements, and the statements
 *     `fn` sends without waiting go out with the COMMIT, so a transaction costs two round trips
 *     when its reads come first. A statement that failed leaves the transaction aborted, so the
 *     COMMIT after it rolls back; its error is what `transaction` throws.
 */
export async function transaction<T>(pool: pg.Pool, fn: (tx: Tx) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    const sent: Promise<unknown>[] = [];
    const send = (q: pg.QueryConfig<unknown[]> | string): void => {
      const answer = typeof q === "string" ? client.query(q) : run(client, q);
      // Handled here so that a failure is not reported before it is awaited, below.
      answer.catch(() => {});
      sent.push(answer);
    };
    const tx: Tx = {
      async query<R extends pg.QueryResultRow>(q: pg.QueryConfig<unknown[]>) {
        const answer = run<R>(client, q);
        await Promise.all([...sent, answer]);
        return answer;
      },
      send,
    };
    let broken: Error | undefined;
    try {
      send("BEGIN");
      const result = await fn(tx);
      const commit = client.query("COMMIT");
      await Promise.all([...sent, commit]);
      return result;
    } catch (e) {
      await Promise.allSettled(sent);
      // A connection that cannot even roll back is not given back to the pool.
      await client.query("ROLLBACK").catch((rollbackError: unknown) => {
        broken = rollbackError instanceof Error ? rollbackError : new Error("rollback failed");
      });
      if (attempt < TRANSACTION_ATTEMPTS && RETRIED_CODES.has(pgCode(e) ?? "")) continue;
      throw asInputError(e);
    } finally {
      client.release(broken);
    }
  }
}

export function pgCode(e: unknown): string | undefined {
  return e instanceof pgDriver().DatabaseError ? e.code : undefined;
}

function asInputError(e: unknown): unknown {
  const code = pgCode(e);
  if (code === undefined || !INPUT_CODES.has(code)) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new InvalidInputError(`PostgreSQL refused a value: ${message}`, { pgCode: code });
}
