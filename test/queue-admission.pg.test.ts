/**
 * Admission under concurrency on PostgreSQL (spi-queues.ts S26, postgres/queues.ts Q1..Q3): four
 * stores, each its own pool (four processes of a fleet), admit from one queue, two calls each at
 * once in every round, while the executions admitted in the round before end and a fifth store
 * records new queued executions. After every round the queue's active executions are counted from
 * the rows
 * (status, lease): never more than the queue's concurrency, nor than the key concurrency for any
 * key; and no execution is ever admitted twice (the leases never expire here). The members drive
 * different flows: admitters that see one state and may take the same candidates collide on the
 * lease rows (Q2's re-check lets one have each), but admitters of different flows pick different
 * ones, so only the serialization (Q1) keeps them under the limits. Removing the advisory lock
 * made this test fail on every run tried (3 of 3, a dozen breaches each).
 *
 * And S27 across connections (append-routine.ts R13): stores recording one dedupe key at once,
 * alone or in a group commit, get one winner and refusals naming it; without the routine's dedupe
 * lock the unique index fails whole calls instead (tried: the test fails).
 */
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { postgresStore, type PostgresStore } from "../src/store/postgres/index.ts";
import { tables } from "../src/store/postgres/db.ts";
import { admitSql } from "../src/store/postgres/queues.ts";
import type { AppendBatch, QueueLimits } from "../src/store/spi.ts";
import { batch, envelope, FLOW, T0 } from "../src/testing/conformance/helpers.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

const url = pgUrl();
const schemas: string[] = [];
afterAll(() => dropSchema(url, ...schemas));

const QUEUE = "hunt";
const KEYS = ["k1", "k2", "k3", "k4", undefined];
const LIMITS: Required<QueueLimits> = { concurrency: 3, keyConcurrency: 1 };
/** Far past the test: no lease expires, so an execution admitted twice is a double admission. */
const TTL_MS = 1e12;
const ADMITTERS = 4;
const ROUNDS = 30;

/** Two flows: fleet members that drive different flows pick different candidates at once. */
const FLOWS = [FLOW, "flow-b"];
const MEMBER_FLOWS = [[FLOW], ["flow-b"], FLOWS, ["flow-b"]];

function record(id: string, key: string | undefined, at: number, flow: string): AppendBatch {
  return batch([{ ...envelope(id, 0), at }], 1, {
    flow,
    status: "queued",
    queue: { name: QUEUE, priority: 0, ...(key === undefined ? {} : { key }) },
    claimLease: { owner: "recorder", expiresAtMs: T0 + 1000 },
    releaseLease: "recorder",
  });
}

/** The queue's active executions from the rows: in all, and the most of any one key. */
async function activeNow(db: pg.Client, schema: string): Promise<{ all: number; maxKey: number }> {
  const t = tables(schema);
  const { rows } = await db.query<{ key: string | null; n: number }>(
    `SELECT e.queue_key AS key, count(*)::int AS n
     FROM ${t.executions} e LEFT JOIN ${t.leases} l ON l.execution_id = e.id
     WHERE e.queue = $1 AND (e.status IN ('pending', 'running', 'parked')
       OR (e.status = 'queued' AND l.owner IS NOT NULL AND l.expires_at > $2))
     GROUP BY e.queue_key`,
    [QUEUE, T0],
  );
  return {
    all: rows.reduce((sum, r) => sum + r.n, 0),
    maxKey: Math.max(0, ...rows.filter((r) => r.key !== null).map((r) => r.n)),
  };
}

describe("queue admission under concurrency (S26, postgres/queues.ts Q1..Q3)", () => {
  it("never passes the queue's or a key's concurrency, never admits one execution twice", async () => {
    const schema = schemaName("queuehunt");
    schemas.push(schema);
    const open = () => postgresStore({ connectionString: url, schema, pool: { max: 2 } });
    const stores: PostgresStore[] = [];
    for (let i = 0; i <= ADMITTERS; i++) stores.push(await open());
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const recorder = stores[ADMITTERS] as PostgresStore;
    const admitted: string[] = [];
    const breaches: string[] = [];
    let recorded = 0;
    const recordMore = async (n: number) => {
      const batches = Array.from({ length: n }, () => {
        const i = recorded++;
        const id = `x${String(i).padStart(4, "0")}`;
        return record(id, KEYS[i % KEYS.length], T0 + i, FLOWS[i % 3 === 0 ? 1 : 0] as string);
      });
      const outcomes = await recorder.appendMany(batches);
      expect(outcomes.every((o) => o.ok)).toBe(true);
    };
    try {
      await recordMore(30);
      /** Admitted and appended, by the member that holds each and its fence. */
      let running: { id: string; fence: number; store: PostgresStore; owner: string }[] = [];
      const admit = async (store: PostgresStore, owner: string, flows: string[]) => {
        const got = await store.admitQueued(owner, {
          queue: QUEUE,
          limits: LIMITS,
          flows,
          limit: 2,
          ttlMs: TTL_MS,
          nowMs: T0,
        });
        for (const a of got) {
          admitted.push(a.executionId);
          const e = envelope(a.executionId, 1, "EXECUTION_ADMITTED");
          const [ok] = await store.appendMany([batch([e], a.fence)]);
          expect(ok?.ok).toBe(true);
          running.push({ id: a.executionId, fence: a.fence, store, owner });
        }
      };
      const end = async (x: (typeof running)[number]) => {
        const e = envelope(x.id, 2, "EXECUTION_COMPLETED");
        const done = batch([e], x.fence, { status: "completed", releaseLease: x.owner });
        const [ok] = await x.store.appendMany([done]);
        expect(ok?.ok).toBe(true);
      };
      for (let round = 0; round < ROUNDS; round++) {
        // Every member admits twice at once while the executions admitted before end.
        const ending = running;
        running = [];
        await Promise.all([
          ...stores.slice(0, ADMITTERS).flatMap((s, i) => {
            const flows = MEMBER_FLOWS[i] ?? FLOWS;
            return [admit(s, `member-${i}`, flows), admit(s, `member-${i}`, flows)];
          }),
          ...ending.map(end),
          recordMore(2),
        ]);
        const count = await activeNow(db, schema);
        if (count.all > LIMITS.concurrency || count.maxKey > LIMITS.keyConcurrency) {
          breaches.push(`round ${round}: ${JSON.stringify(count)}`);
        }
      }
      expect(breaches).toEqual([]);
      expect(admitted.length).toBeGreaterThan(20);
      expect(new Set(admitted).size).toBe(admitted.length);
    } finally {
      await db.end();
      await Promise.all(stores.map((s) => s.close()));
    }
  }, 120_000);

  it("S27: of stores recording one dedupe key at once, exactly one wins; the others name it", async () => {
    const schema = schemaName("queuededupe");
    schemas.push(schema);
    const stores: PostgresStore[] = [];
    for (let i = 0; i < 4; i++) {
      stores.push(await postgresStore({ connectionString: url, schema, pool: { max: 2 } }));
    }
    try {
      for (let round = 0; round < 10; round++) {
        const dedupe = `d${round}`;
        const outcomes = await Promise.all(
          stores.map(async (store, i) => {
            const b = record(`r${round}-${i}`, undefined, T0, FLOW);
            const entry = { name: QUEUE, priority: 0, dedupe };
            // Alone, or in a group commit with another execution (the routine's two paths).
            const other = record(`r${round}-${i}-other`, undefined, T0, FLOW);
            const call = i % 2 === 0 ? [{ ...b, queue: entry }] : [other, { ...b, queue: entry }];
            const results = await store.appendMany(call);
            return results[results.length - 1];
          }),
        );
        const won = outcomes.flatMap((o, i) => (o?.ok ? [`r${round}-${i}`] : []));
        expect(won).toHaveLength(1);
        for (const o of outcomes) {
          if (o && !o.ok) {
            expect(o.error.code).toBe("LOOM_QUEUE_DUPLICATE");
            expect(o.error.details).toEqual({ existingId: won[0] });
          }
        }
      }
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  }, 60_000);

  it("Q5: at 10,000 ended executions, admission walks the queue's indexes", async () => {
    const schema = schemaName("queueplan");
    schemas.push(schema);
    await (await postgresStore({ connectionString: url, schema, pool: { max: 1 } })).close();
    const t = tables(schema);
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await db.query(
        `INSERT INTO ${t.executions} (id, flow, status, head, created_at, updated_at, queue,
           queue_priority)
         SELECT 'e-' || lpad(g::text, 6, '0'), 'f', CASE WHEN g % 500 = 0 THEN 'queued'
           ELSE 'completed' END, 1, g, g, 'q' || (g % 10), 0
         FROM generate_series(1, 10000) AS g`,
      );
      await db.query(`ANALYZE ${t.executions}`);
      const { rows } = await db.query<{ "QUERY PLAN": string }>(`EXPLAIN ${admitSql(t)}`, [
        "q0",
        T0,
        ["f"],
        10,
        5,
        null,
        "w",
        T0 + 1,
      ]);
      const plan = rows.map((r) => r["QUERY PLAN"]).join("\n");
      expect(plan).toContain("executions_queued");
      expect(plan).toContain("executions_by_queue");
      expect(plan).not.toMatch(/Seq Scan on executions/);
    } finally {
      await db.end();
    }
  });
});
