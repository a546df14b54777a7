/**
 * The claim's index (src/store/postgres/leases.ts L4, append-routine.ts R9) hunted for a
 * violation: seeded random sequences of starts, steps, parks, ends, group commits, releases,
 * acquires, renewals, expiries, deletes and claims by several owners (two at once, sometimes)
 * against PostgreSQL. After every operation the lease rows' `runnable` flags must equal whether
 * their executions are pending or running (none missing: the claim would not find it); every claim
 * must take exactly what a brute-force query over the statuses and lease columns says is free
 * (all of it when the limit allows, else as many as the limit). An earlier release's routine,
 * which ends an execution without clearing its flag, is played by SQL: the claim never takes such
 * an execution, and clears the flag when it walks past it.
 */
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import type { ExecutionStatus } from "../src/kernel/events.ts";
import { tables } from "../src/store/postgres/db.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import type { AppendBatch, FleetStore, Store } from "../src/store/spi.ts";
import { batch, envelopes, T0, TTL_MS } from "../src/testing/conformance/helpers.ts";
import { dropSchema, pgUrl, schemaName } from "./support/postgres.ts";

const schemas: string[] = [];
afterAll(() => dropSchema(pgUrl(), ...schemas));

const FLOWS = ["flow-a", "flow-b"];
const OWNERS = ["o1", "o2", "o3"];
const STATUSES: ExecutionStatus[] = ["pending", "running", "running", "parked"];
const ENDS: ExecutionStatus[] = ["completed", "failed", "cancelled"];

/** mulberry32: a small seeded generator, so a failing seed replays. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;
  return { next, int, pick };
}

type Member = Store & FleetStore;

async function hunt(seed: number, steps: number): Promise<void> {
  const url = pgUrl();
  const schema = schemaName("claimix");
  schemas.push(schema);
  const t = tables(schema);
  const store = (await postgresStore({ connectionString: url, schema })) as Member;
  const peer = (await postgresStore({ connectionString: url, schema })) as Member;
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const r = rng(seed);
  let now = T0;
  /** Next sequence number of each execution the test made. */
  const heads = new Map<string, number>();
  /** Executions an "earlier release" ended, whose flag may still be set (L4). */
  const stale = new Set<string>();
  let made = 0;
  let claimedTotal = 0;
  /** Stale flags a claim cleared. */
  let cleared = 0;
  const anyId = () => r.pick([...heads.keys()]);
  const lease = async (id: string) => store.getLease(id);

  /** Brute force over the old columns: what a claim at `now` of `flows` may take. */
  const claimable = async (flows: string[]) => {
    const { rows } = await db.query<{ id: string }>(
      `SELECT l.execution_id AS id FROM ${t.leases} l JOIN ${t.executions} e ON e.id = l.execution_id
       WHERE e.status IN ('pending', 'running') AND e.flow = ANY($1::text[])
         AND (l.owner IS NULL OR l.expires_at <= $2) ORDER BY 1`,
      [flows, now],
    );
    return rows.map((x) => x.id);
  };

  /** The flags: none missing ever; none extra but the stale ones an "earlier release" left. */
  const checkFlags = async (op: string) => {
    const { rows } = await db.query<{ id: string; runnable: boolean; status: string | null }>(
      `SELECT l.execution_id AS id, l.runnable, e.status FROM ${t.leases} l
       LEFT JOIN ${t.executions} e ON e.id = l.execution_id
       WHERE l.runnable IS DISTINCT FROM coalesce(e.status IN ('pending', 'running'), false)`,
    );
    for (const row of rows) {
      if (!row.runnable || !stale.has(row.id)) {
        throw new Error(`seed ${seed}, after ${op}: flag wrong on ${JSON.stringify(row)}`);
      }
    }
    for (const id of stale) {
      if (!rows.some((x) => x.id === id)) cleared += Number(stale.delete(id));
    }
  };

  const append = async (batches: AppendBatch[]) => {
    const outcomes = await r.pick([store, peer]).appendMany(batches);
    for (const [i, o] of outcomes.entries()) {
      const b = batches[i] as AppendBatch;
      if (o.ok) heads.set(b.executionId, b.expectedSeq + b.events.length);
    }
  };

  /** A batch for `id` under its current lease, with `status`; ends release the lease, often. */
  const next = async (id: string, status: ExecutionStatus): Promise<AppendBatch | undefined> => {
    const l = await lease(id);
    if (!l) return undefined;
    const from = heads.get(id) ?? 0;
    const extra: Partial<AppendBatch> = { status };
    if (l.owner && r.next() < (ENDS.includes(status) ? 0.8 : 0.15)) extra.releaseLease = l.owner;
    return batch(envelopes(id, from, 1 + r.int(2)), l.fence, extra);
  };

  const ops: [number, string, () => Promise<void>][] = [
    [
      12,
      "start",
      async () => {
        const id = `x-${String(made++).padStart(4, "0")}`;
        const owner = r.pick(OWNERS);
        const status = r.pick(STATUSES);
        const flow = r.pick(FLOWS);
        if (r.next() < 0.7) {
          const claim = { owner, expiresAtMs: now + TTL_MS };
          await append([batch(envelopes(id, 0, 1), 1, { flow, status, claimLease: claim })]);
        } else {
          // Acquired first (a lease row with no execution yet), then the first batch.
          const l = await store.acquireLease(id, owner, { ttlMs: TTL_MS, nowMs: now });
          if (l && r.next() < 0.8)
            await append([batch(envelopes(id, 0, 1), l.fence, { flow, status })]);
          else heads.set(id, 0);
        }
      },
    ],
    [
      20,
      "step",
      async () =>
        void (await append(((b) => (b ? [b] : []))(await next(anyId(), r.pick(STATUSES))))),
    ],
    [
      6,
      "end",
      async () => void (await append(((b) => (b ? [b] : []))(await next(anyId(), r.pick(ENDS))))),
    ],
    [
      8,
      "group",
      async () => {
        // A call for several executions (the routine's arrays), an execution sometimes twice
        // (its second batch checked against what the first left).
        const picked: string[] = [];
        for (let n = 2 + r.int(3); n > 0; n--) {
          picked.push(picked.length > 0 && r.next() < 0.5 ? (picked.at(-1) as string) : anyId());
        }
        const batches: AppendBatch[] = [];
        for (const id of picked) {
          const status = r.next() < 0.2 ? r.pick(ENDS) : r.pick(STATUSES);
          const earlier = batches.filter((b) => b.executionId === id).at(-1);
          if (!earlier) {
            const b = await next(id, status);
            if (b) batches.push(b);
          } else {
            const from = earlier.expectedSeq + earlier.events.length;
            batches.push(batch(envelopes(id, from, 1), earlier.fence, { status }));
          }
        }
        if (batches.length > 0) await append(batches);
      },
    ],
    [
      6,
      "release",
      async () => {
        const id = anyId();
        const l = await lease(id);
        if (l?.owner) await r.pick([store, peer]).releaseLease(id, l.owner, l.fence);
      },
    ],
    [
      5,
      "acquire",
      async () => {
        const id = anyId();
        const l = await lease(id);
        const takeoverFence = l && r.next() < 0.3 ? l.fence : undefined;
        await store.acquireLease(id, r.pick(OWNERS), { ttlMs: TTL_MS, nowMs: now, takeoverFence });
      },
    ],
    [
      4,
      "renew",
      async () => {
        const id = anyId();
        const l = await lease(id);
        if (l?.owner) await store.renewLease(id, l.owner, l.fence, { ttlMs: TTL_MS, nowMs: now });
      },
    ],
    [6, "expire", async () => void (now += r.int(TTL_MS))],
    [
      2,
      "delete",
      async () => {
        const id = anyId();
        if (await store.deleteExecution(id)) heads.delete(id);
        stale.delete(id);
      },
    ],
    [
      3,
      "stale",
      async () => {
        // An earlier release's routine ends a runnable execution: status and lease, not the flag.
        const id = anyId();
        const { rowCount } = await db.query(
          `UPDATE ${t.executions} SET status = 'completed'
           WHERE id = $1 AND status IN ('pending', 'running')`,
          [id],
        );
        await db.query(`UPDATE ${t.leases} SET owner = NULL WHERE execution_id = $1`, [id]);
        if (rowCount === 1) stale.add(id);
      },
    ],
    [
      14,
      "claim",
      async () => {
        const flows = r.next() < 0.7 ? FLOWS : [r.pick(FLOWS)];
        const free = await claimable(flows);
        const big = r.next() < 0.5;
        const opts = { flows, limit: big ? 1000 : 1 + r.int(4), ttlMs: TTL_MS, nowMs: now };
        const before = new Map(
          await Promise.all(free.map(async (id) => [id, await lease(id)] as const)),
        );
        const twice = big && r.next() < 0.4;
        const answers = await Promise.all(
          twice
            ? [store.claimRunnable("c1", opts), peer.claimRunnable("c2", opts)]
            : [r.pick([store, peer]).claimRunnable(r.pick(OWNERS), opts)],
        );
        const got = answers.flat().map((l) => l.executionId);
        claimedTotal += got.length;
        expect(new Set(got).size, `seed ${seed}: claimed twice`).toBe(got.length);
        for (const id of got) expect(free, `seed ${seed}: ${id} not claimable`).toContain(id);
        if (big) expect([...got].sort(), `seed ${seed}: not all found`).toEqual(free);
        else if (stale.size === 0) expect(got.length).toBe(Math.min(opts.limit, free.length));
        for (const l of answers.flat()) {
          expect(l.fence).toBe((before.get(l.executionId)?.fence ?? 0) + 1);
          expect(l.expiresAtMs).toBe(now + TTL_MS);
        }
      },
    ],
  ];
  const total = ops.reduce((n, [w]) => n + w, 0);
  try {
    for (let i = 0; i < steps; i++) {
      let roll = r.int(total);
      const op = ops.find(([w]) => (roll -= w) < 0) ?? ops[0];
      const [, name, fn] = op as (typeof ops)[number];
      if (name !== "start" && heads.size === 0) continue;
      await fn();
      await checkFlags(`step ${i} (${name})`);
    }
    // The hunt went where it should: work was claimed, and flags went both ways.
    expect(claimedTotal).toBeGreaterThan(10);
    expect(cleared).toBeGreaterThan(0);
    const { rows } = await db.query<{ on: number; off: number }>(
      `SELECT count(*) FILTER (WHERE runnable)::int AS on, count(*) FILTER (WHERE NOT runnable)::int
       AS off FROM ${t.leases}`,
    );
    expect(rows[0]?.on).toBeGreaterThan(0);
    expect(rows[0]?.off).toBeGreaterThan(0);
  } finally {
    await db.end();
    await store.close();
    await peer.close();
  }
}

describe("the claim's order (leases.ts L4)", () => {
  it("takes a dead member's expired lease before a backlog of released ones", async () => {
    const url = pgUrl();
    const schema = schemaName("claimord");
    schemas.push(schema);
    const store = (await postgresStore({ connectionString: url, schema })) as Member;
    try {
      const start = (id: string, status: ExecutionStatus, owner: string) =>
        store.appendMany([
          batch(envelopes(id, 0, 1), 1, {
            status,
            claimLease: { owner, expiresAtMs: T0 + TTL_MS },
            ...(owner === "gone" ? {} : { releaseLease: owner }),
          }),
        ]);
      // The backlog sorts before the dead member's execution by id, and was released later.
      for (const id of ["a-1", "a-2", "a-3"]) await start(id, "pending", "w1");
      await start("z-dead", "running", "gone");
      // At T0 + TTL_MS the dead member's lease has expired.
      const opts = { flows: ["flow-a"], limit: 1, ttlMs: TTL_MS, nowMs: T0 + TTL_MS };
      const first = await store.claimRunnable("c1", opts);
      expect(first.map((l) => l.executionId)).toEqual(["z-dead"]);
      const next = await store.claimRunnable("c1", { ...opts, limit: 10 });
      expect(next.map((l) => l.executionId)).toEqual(["a-1", "a-2", "a-3"]);
    } finally {
      await store.close();
    }
  });
});

describe("the claim's index against brute force (leases.ts L4)", () => {
  for (const seed of [1, 2, 3]) {
    it(`seed ${seed}: flags follow statuses, and claims take exactly what is free`, async () => {
      await hunt(seed, 400);
    });
  }
});
