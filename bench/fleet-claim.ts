/**
 * Claim latency at scale, for the `fleet` benchmark (bench/fleet.ts): the p50/p99 of one fleet
 * claim (`claimRunnable`, the statement a worker runs to claim runnable executions, L2 of
 * src/store/postgres/leases.ts) with 10^4, 10^5, 10^6 executions in the store.
 *
 * The store is filled by SQL, not through Loom (a million executions started one by one would take
 * an hour): template executions are made through Loom first (one run to completion, one started
 * and not driven), and their rows are copied under new ids with `generate_series`, so every row
 * has the store's exact format:
 * - executions and leases rows for every execution; 99% copy the completed template (terminal,
 *   lease released), 1% are runnable (the lease row's `runnable` flag copied with it): half `pending` with a free lease (work waiting to be
 *   claimed), half `running` with a live lease another owner holds (work in flight);
 * - events rows for the runnable ones only (the claim does not read events; the completed ones'
 *   logs would only make the fill slower);
 * - ids are an md5 of their number, so the runnable ones are spread over the id order as random ids
 *   would be; each size grows the store of the one before it, then VACUUM ANALYZE runs, as
 *   autovacuum would have on a store that grew this large, and a CHECKPOINT, so the fill's WAL
 *   is not written out while the claims (each a commit) are timed.
 *
 * At each size two claims are timed, each through the store's `claimRunnable` (limit
 * CLAIM_BATCH, so including the round trip):
 * - `claim`: the mixed store above; what a claim takes is released again between samples (not
 *   timed), so every sample sees the same store;
 * - `idleClaim`: every runnable execution's lease is held live, so the claim finds nothing: what
 *   each idle worker runs at every poll of a busy fleet, the claim's worst walk (at most 100
 *   samples: at 10^6 each takes a tenth of a second or more).
 * At the largest size the claim's plan is printed to stderr (EXPLAIN ANALYZE of the prepared
 * statement after 6 runs, so the plan PostgreSQL settles on, generic or custom, in a rolled-back
 * transaction).
 */
import pg from "pg";
import { createRuntime } from "../src/index.ts";
import { CLAIM_BATCH } from "../src/runtime/fleet.ts";
import { tables, type Tables } from "../src/store/postgres/db.ts";
import { postgresStore } from "../src/store/postgres/index.ts";
import { claimRunnableSql } from "../src/store/postgres/leases.ts";
import type { FleetStore, Store } from "../src/store/spi.ts";
import { quick } from "../test/fixtures/fleet/flows.ts";
import { latencyStats, note, nowMs, round, UsageError } from "./lib.ts";

const DONE = "tpl-done";
const PENDING = "tpl-pending";
const OTHER = "bench-other-owner";
const IDLE = "bench-idle-owner";
const FAR = 9e15;

export interface ClaimFigure {
  executions: number;
  runnable: number;
  fillMs: number;
  p50Ms: number;
  p99Ms: number;
  idleP50Ms: number;
  idleP99Ms: number;
}

/** `--claim-sizes 10000,100000,1000000`: ascending positive integers; `0` or `none` skips. */
export function claimSizesFlag(raw: string | undefined): number[] {
  if (raw === undefined) return [10_000, 100_000, 1_000_000];
  if (raw === "0" || raw === "none") return [];
  const sizes = raw.split(",").map(Number);
  if (sizes.some((n) => !Number.isSafeInteger(n) || n < 100)) {
    throw new UsageError(`--claim-sizes needs integers of at least 100, got ${raw}`);
  }
  return sizes.sort((a, b) => a - b);
}

/**
 * Copies the templates' rows under the ids of executions number `from`..`to` (see the header):
 * kind `d` completed, `f` pending with a free lease, `h` running with a lease held by another.
 */
export async function fill(db: pg.ClientBase, t: Tables, from: number, to: number): Promise<void> {
  const series = `SELECT 'fill-' || md5(g::text) AS id,
      CASE WHEN g % 100 <> 0 THEN 'd' WHEN g % 200 = 0 THEN 'h' ELSE 'f' END AS kind
    FROM generate_series($1::bigint, $2::bigint) AS g`;
  await db.query("BEGIN");
  await db.query(
    `INSERT INTO ${t.executions} (id, flow, status, head, created_at, updated_at)
     SELECT s.id, e.flow, CASE s.kind WHEN 'h' THEN 'running' ELSE e.status END, e.head,
       e.created_at, e.updated_at
     FROM (${series}) s JOIN ${t.executions} e ON e.id = CASE s.kind WHEN 'd' THEN $3 ELSE $4 END`,
    [from, to, DONE, PENDING],
  );
  await db.query(
    `INSERT INTO ${t.leases} (execution_id, owner, fence, expires_at, runnable)
     SELECT s.id, CASE s.kind WHEN 'h' THEN $5 ELSE l.owner END, l.fence,
       CASE s.kind WHEN 'h' THEN $6::bigint ELSE l.expires_at END, l.runnable
     FROM (${series}) s JOIN ${t.leases} l
       ON l.execution_id = CASE s.kind WHEN 'd' THEN $3 ELSE $4 END`,
    [from, to, DONE, PENDING, OTHER, FAR],
  );
  await db.query(
    // Under each copy's own key (src/store/postgres/event-rows.ts E1), given by its row above.
    `INSERT INTO ${t.events} (x, seq, at, fence, kind, kind_name, payload, meta)
     SELECT x.n, v.seq, v.at, v.fence, v.kind, v.kind_name, v.payload, v.meta
     FROM (${series}) s JOIN ${t.executions} x ON x.id = s.id
       JOIN ${t.events} v ON v.x = (SELECT n FROM ${t.executions} WHERE id = $3)
     WHERE s.kind <> 'd'`,
    [from, to, PENDING],
  );
  await db.query("COMMIT");
  await db.query(`VACUUM ANALYZE ${t.executions}`);
  await db.query(`VACUUM ANALYZE ${t.leases}`);
  await db.query(`VACUUM ANALYZE ${t.events}`);
  // The fill's WAL (hundreds of MB at 10^6) would otherwise be checkpointed while the claims are
  // timed, and each claim's commit wait on it; a role that may not checkpoint measures without.
  await db.query("CHECKPOINT").catch(() => note("fleet: CHECKPOINT refused, claims timed without"));
}

/** The two templates `fill` copies, made through Loom. */
export async function templates(store: Store): Promise<void> {
  const runtime = createRuntime({ store, background: false, closeStore: false }).registerFlow(
    quick,
  );
  try {
    await (await runtime.start(quick, { steps: 3 }, { id: DONE })).result();
    await runtime.start(quick, { steps: 3 }, { id: PENDING, drive: false });
  } finally {
    await runtime.close();
  }
}

async function timeClaims(
  store: FleetStore,
  db: pg.ClientBase,
  t: Tables,
  n: number,
): Promise<{ samples: number[]; claimed: number }> {
  const samples: number[] = [];
  let claimed = 0;
  for (let i = 0; i < n + 20; i++) {
    const t0 = nowMs();
    const got = await store.claimRunnable("bench-claimer", {
      flows: [quick.name],
      limit: CLAIM_BATCH,
      ttlMs: 60_000,
      nowMs: Date.now(),
    });
    if (i >= 20) samples.push(nowMs() - t0);
    claimed = got.length;
    if (got.length > 0) {
      await db.query(`UPDATE ${t.leases} SET owner = NULL WHERE execution_id = ANY($1)`, [
        got.map((l) => l.executionId),
      ]);
    }
  }
  return { samples, claimed };
}

/** EXPLAIN ANALYZE of the claim as a worker's connection runs it, in a rolled-back transaction. */
async function explainClaim(db: pg.ClientBase, t: Tables): Promise<string> {
  await db.query("BEGIN");
  try {
    await db.query(
      `PREPARE bench_claim(text[], bigint, int, text, bigint) AS ${claimRunnableSql(t)}`,
    );
    const args = `(ARRAY['${quick.name}'], ${Date.now()}, ${CLAIM_BATCH}, 'bench-explain', ${FAR})`;
    for (let i = 0; i < 5; i++) await db.query(`EXECUTE bench_claim${args}`);
    const { rows } = await db.query<{ "QUERY PLAN": string }>(
      `EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_claim${args}`,
    );
    return rows.map((r) => r["QUERY PLAN"]).join("\n");
  } finally {
    await db.query("ROLLBACK");
    await db.query("DEALLOCATE ALL");
  }
}

/** The claim's latency at each size in `sizes` (ascending), in one schema grown size by size. */
export async function claimLatency(
  url: string,
  schema: string,
  sizes: readonly number[],
  samples = 500,
): Promise<ClaimFigure[]> {
  if (sizes.length === 0) return [];
  const t = tables(schema);
  const store = await postgresStore({ connectionString: url, schema });
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const out: ClaimFigure[] = [];
  try {
    await templates(store);
    let filled = 0;
    for (const size of sizes) {
      const t0 = nowMs();
      await fill(db, t, filled + 1, size);
      filled = size;
      const fillMs = nowMs() - t0;
      note(`fleet: claim store filled to ${size} executions by SQL in ${round(fillMs, 0)} ms`);
      const mixed = await timeClaims(store, db, t, samples);
      await db.query(
        `UPDATE ${t.leases} l SET owner = $1, expires_at = $2 FROM ${t.executions} e
         WHERE e.id = l.execution_id AND e.status IN ('pending', 'running') AND l.owner IS NULL`,
        [IDLE, FAR],
      );
      // Fewer: at 10^6 each walks every execution in flight (a tenth of a second or more).
      const idle = await timeClaims(store, db, t, Math.min(samples, 100));
      if (idle.claimed !== 0) throw new Error("an idle claim took a held execution");
      if (size === sizes.at(-1))
        note(`fleet: claim plan at ${size}:\n${await explainClaim(db, t)}`);
      await db.query(`UPDATE ${t.leases} SET owner = NULL WHERE owner = $1`, [IDLE]);
      const m = latencyStats(mixed.samples);
      const i = latencyStats(idle.samples);
      out.push({
        executions: size,
        runnable: Math.floor(size / 100),
        fillMs,
        p50Ms: m.p50Us / 1000,
        p99Ms: m.p99Us / 1000,
        idleP50Ms: i.p50Us / 1000,
        idleP99Ms: i.p99Us / 1000,
      });
    }
    return out;
  } finally {
    await db.end();
    await store.close();
  }
}
