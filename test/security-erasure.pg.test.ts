/**
 * Issue 22, erasure on PostgreSQL (src/runtime/erase-subject.ts X5, X6; src/store/postgres/keys.ts
 * K2, K3), written as the exploits: a resume payload that rode a `continueAsNew` carry must leave
 * no byte in any table of the store's schema (every row read as text) after `eraseSubject`; and a
 * reader holding a snapshot (a REPEATABLE READ transaction, as `pg_dump` holds one) makes the
 * table's rewrite copy the deleted key row into the new file, so erasure may not claim
 * `keyDestroyed: true` then: it waits the reader out, or says it could not confirm.
 *
 * The key's bytes are searched for in the keys table's files (`pg_read_binary_file`, a superuser's:
 * the suites' role is), after a CHECKPOINT. Like test/store-postgres-keys.pg.test.ts, the suite
 * runs in a database of its own, so no other suite's snapshot holds the row it scrubs.
 */
import { randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, type Store } from "../src/index.ts";
import { postgresStore, type PostgresStoreOptions } from "../src/store/postgres/index.ts";
import { subjectKeyId } from "../src/trust/sealed-store.ts";
import { until } from "./helpers.ts";
import { pgUrl, schemaName } from "./support/postgres.ts";
import { carryFlow, carryResumePayload } from "./support/erasure-carry.ts";

const url = pgUrl();
const database = `loom_erasure_${randomBytes(5).toString("hex")}`;
const isolated = (() => {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
})();
const admin = new pg.Client({ connectionString: isolated });

async function withClient<T>(connectionString: string, fn: (c: pg.Client) => Promise<T>) {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  await withClient(url, (c) => c.query(`CREATE DATABASE "${database}"`));
  await admin.connect();
});
afterAll(async () => {
  await admin.end();
  await withClient(url, (c) => c.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`));
});

async function open(options: Partial<PostgresStoreOptions> = {}) {
  const store = await postgresStore({
    connectionString: isolated,
    schema: schemaName("erasure"),
    pool: { max: 4 },
    ...options,
  });
  return { store, runtime: runtimeOver(store) };
}

/**
 * Another runtime over the same schema, with the default wait: a second erasure, run once the
 * reader ended, may still meet another suite's short transaction in the shared server.
 */
async function reopen(schema: string) {
  return runtimeOver(await postgresStore({ connectionString: isolated, schema, pool: { max: 4 } }));
}

function runtimeOver(store: Store) {
  return createRuntime({
    store,
    pollIntervalMs: 20,
    features: { continueAsNew: true },
    snapshotEvery: 1,
  }).registerFlow(carryFlow);
}

/** Every row of every table of the store's schema, as text. */
async function dump(schema: string): Promise<string> {
  const { rows: tables } = await admin.query<{ table_name: string }>(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
    [schema],
  );
  const parts: string[] = [];
  for (const { table_name } of tables) {
    const { rows } = await admin.query<{ t: string }>(
      `SELECT t::text AS t FROM "${schema}"."${table_name}" t`,
    );
    for (const r of rows) parts.push(r.t);
  }
  return parts.join("\n");
}

/** Whether `material` is in the keys table's current file or in the file at `path`. */
async function inKeysFile(schema: string, material: string, path?: string) {
  await admin.query("CHECKPOINT");
  const { rows } = await admin.query<{ path: string; at: number | null }>(
    `SELECT q.path, position(convert_to($1, 'UTF8') IN
       pg_read_binary_file(q.path, 0, (pg_stat_file(q.path, true)).size, true)) AS at
     FROM (SELECT coalesce($2::text, pg_relation_filepath($3::regclass)) AS path) AS q`,
    [material, path ?? null, `"${schema}".keys`],
  );
  return { path: rows[0]?.path ?? "", found: (rows[0]?.at ?? 0) > 0 };
}

async function keyBytes(store: Store, subject: string): Promise<string> {
  const material = await store.getKey(subjectKeyId(subject));
  if (!material) throw new Error(`no key for ${subject}`);
  return material.slice(material.lastIndexOf(":") + 1);
}

/** A reader in the store's database (a dump, a report) that will hold a snapshot. */
async function reader(): Promise<pg.Client> {
  const holder = new pg.Client({ connectionString: isolated });
  await holder.connect();
  return holder;
}

/**
 * The reader takes a snapshot that still sees the key row: a REPEATABLE READ transaction's, taken
 * by a read of another table (so it holds no lock on the keys table, only the snapshot).
 */
async function holdSnapshot(holder: pg.Client): Promise<void> {
  await holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  await holder.query("SELECT count(*) FROM pg_class");
}

describe("security: erasure on PostgreSQL leaves none of the subject's data (issue 22)", () => {
  it("X5: a resume payload carried by continueAsNew is in no table's rows after erasure", async () => {
    const { store, runtime } = await open();
    try {
      const secret = `CAROL-${randomUUID()}`;
      await carryResumePayload(runtime, "c", "carol", secret);
      const erasure = await runtime.eraseSubject("carol");
      expect(erasure.executions.sort()).toEqual(["c", "c~1"]);
      expect(erasure.keyDestroyed).toBe(true);
      expect(await dump(store.schema)).not.toContain(secret);
    } finally {
      await runtime.close();
    }
  });

  it("K3: a reader's snapshot that outlives the wait: keyDestroyed is not claimed while the row is in the file; a second erasure after it ends scrubs it", async () => {
    const { store, runtime } = await open({ keyScrubWaitMs: 300 });
    const holder = await reader();
    try {
      await carryResumePayload(runtime, "c", "carol", `CAROL-${randomUUID()}`);
      const key = await keyBytes(store, "carol");
      await holdSnapshot(holder);
      const erasure = await runtime.eraseSubject("carol");
      const kept = await inKeysFile(store.schema, key);
      expect(kept.found).toBe(true);
      expect(erasure.keyDestroyed).toBe(false);
      expect(erasure.keyUnconfirmed).toMatch(/snapshot/);
      await holder.query("COMMIT");
      const second = await reopen(store.schema);
      const again = await second.eraseSubject("carol").finally(() => second.close());
      expect(again.keyUnconfirmed).toBeUndefined();
      expect((await inKeysFile(store.schema, key)).found).toBe(false);
      expect((await inKeysFile(store.schema, key, kept.path)).found).toBe(false);
    } finally {
      await holder.query("ROLLBACK").catch(() => undefined);
      await holder.end();
      await runtime.close();
    }
  });

  it("K3: a reader's snapshot that ends within the wait is waited out, and then the key is destroyed", async () => {
    const { store, runtime } = await open({ keyScrubWaitMs: 60_000 });
    const holder = await reader();
    try {
      await carryResumePayload(runtime, "c", "carol", `CAROL-${randomUUID()}`);
      const key = await keyBytes(store, "carol");
      await holdSnapshot(holder);
      let settled = false;
      const erasing = runtime.eraseSubject("carol");
      void erasing.then(
        () => (settled = true),
        () => (settled = true),
      );
      // The delete is done at once; the rewrite waits for the holder's snapshot.
      await until(async () => (await store.getKey(subjectKeyId("carol"))) === undefined);
      expect(settled).toBe(false);
      await holder.query("COMMIT");
      const erasure = await erasing;
      expect(erasure.keyDestroyed).toBe(true);
      expect(erasure.keyUnconfirmed).toBeUndefined();
      expect((await inKeysFile(store.schema, key)).found).toBe(false);
    } finally {
      await holder.query("ROLLBACK").catch(() => undefined);
      await holder.end();
      await runtime.close();
    }
  });

  it("K3: a reader holding a lock on the keys table does not hang the erasure: it reports the scrub unconfirmed, and a second erasure completes it", async () => {
    const { store, runtime } = await open({ keyScrubWaitMs: 300 });
    const holder = await reader();
    try {
      await carryResumePayload(runtime, "c", "carol", `CAROL-${randomUUID()}`);
      const key = await keyBytes(store, "carol");
      // A reader of the keys table itself (pg_dump reads every table so): a lock and a snapshot.
      await holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      await holder.query(`SELECT count(*) FROM "${store.schema}".keys`);
      const erasure = await runtime.eraseSubject("carol");
      expect(erasure.keyDestroyed).toBe(false);
      expect(erasure.keyUnconfirmed).toMatch(/lock/);
      expect((await inKeysFile(store.schema, key)).found).toBe(true);
      await holder.query("COMMIT");
      const second = await reopen(store.schema);
      const again = await second.eraseSubject("carol").finally(() => second.close());
      expect(again.keyUnconfirmed).toBeUndefined();
      expect((await inKeysFile(store.schema, key)).found).toBe(false);
    } finally {
      await holder.query("ROLLBACK").catch(() => undefined);
      await holder.end();
      await runtime.close();
    }
  });
});
