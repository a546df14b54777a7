/**
 * `appendMany` on PostgreSQL: group commit (S4), each batch checked and applied on its own, in one
 * transaction.
 *
 * A1. The transaction first locks, FOR UPDATE and sorted by execution id, the lease rows and then
 *     the execution rows of every execution in the call. Everything else that takes both (a
 *     delete, a claim) takes them in the same order or skips locked rows, so group commits never
 *     deadlock on them (a deadlock elsewhere, on timer rows, rolls back and retries: db.ts D2).
 * A2. The execution rows are read after the leases are locked, in a statement of their own, so
 *     they show whatever the previous holder of a lease committed: of concurrent appends at one
 *     sequence number exactly one wins (S2), the fence and the sequence number are checked in the
 *     transaction that inserts (S3).
 * A3. While its rows are locked nothing else can change them, so the batches are checked in
 *     memory, in order, against what the locked rows held and what the batches before them did; a
 *     refused batch writes nothing and leaves the others alone (S4). The one check that needs the
 *     database is a claim (S9): its lease row did not exist, so another transaction may be
 *     creating it; INSERT ... ON CONFLICT DO NOTHING decides, and the loser is fenced.
 * A4. What the accepted batches write is then written in a few multi-row statements (events and
 *     execution rows in one), whatever the number of batches; their wakes are sent with
 *     `pg_notify` in the same transaction (S18, wakes.ts N1).
 */
import type pg from "pg";
import type { Envelope, ExecutionStatus } from "../../kernel/events.ts";
import { FencedError, InvalidInputError, LoomError, ensureError } from "../../kernel/errors.ts";
import { jsonText } from "../../kernel/json.ts";
import { checkBatch, effectiveFence } from "../append-check.ts";
import type { AppendBatch, AppendOutcome, FleetWake, StoreHooks } from "../spi.ts";
import { statement, transaction, type Tables, type Tx } from "./db.ts";
import { TimerPlan } from "./timer-plan.ts";
import { wakeText } from "./wakes.ts";

const NOTICE_TTL_MS = 24 * 60 * 60 * 1000;

/** What the locked rows say of one execution, as the batches before this one left it (A3). */
interface Known {
  head: number;
  status: ExecutionStatus | undefined;
  fence: number | undefined;
  owner: string | undefined;
}

interface ExecutionWrite {
  flow: string;
  status: ExecutionStatus;
  head: number;
  createdAtMs: number;
  updatedAtMs: number;
}

/** Everything the accepted batches write (A4). */
class WritePlan {
  readonly events: Envelope[] = [];
  readonly executions = new Map<string, ExecutionWrite>();
  readonly releases: { id: string; owner: string; fence: number }[] = [];
  readonly snapshots = new Map<string, { seq: number; state: string }>();
  readonly notices: { owner: string; id: string; kind: string; atMs: number }[] = [];
  pruneNoticesBeforeMs = -Infinity;
  readonly timers = new TimerPlan();
  readonly wakes: FleetWake[] = [];
}

export function postgresAppend(
  pool: pg.Pool,
  t: Tables,
  channel: string,
  hooks: StoreHooks,
): (batches: readonly AppendBatch[]) => Promise<AppendOutcome[]> {
  const s = {
    lockLeases: statement(
      "lock_leases",
      `SELECT execution_id, owner, fence FROM ${t.leases}
       WHERE execution_id = ANY($1::text[]) ORDER BY execution_id FOR UPDATE`,
    ),
    lockExecutions: statement(
      "lock_executions",
      `SELECT id, status, head FROM ${t.executions}
       WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`,
    ),
    claim: statement(
      "claim_with_batch",
      `INSERT INTO ${t.leases} (execution_id, owner, fence, expires_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (execution_id) DO NOTHING RETURNING fence`,
    ),
    write: statement(
      "append",
      `WITH appended AS (
         INSERT INTO ${t.events} (execution_id, seq, kind, at, payload, meta)
         SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[],
           $6::text[])
       )
       INSERT INTO ${t.executions} AS x (id, flow, status, head, created_at, updated_at)
       SELECT * FROM unnest($7::text[], $8::text[], $9::text[], $10::bigint[], $11::bigint[],
         $12::bigint[])
       ON CONFLICT (id) DO UPDATE SET status = excluded.status, head = excluded.head,
         updated_at = excluded.updated_at`,
    ),
    release: statement(
      "release_with_batch",
      `UPDATE ${t.leases} AS l SET owner = NULL
       FROM unnest($1::text[], $2::text[], $3::bigint[]) AS r(id, owner, fence)
       WHERE l.execution_id = r.id AND l.owner = r.owner AND l.fence = r.fence`,
    ),
    snapshot: statement(
      "snapshot_with_batch",
      `INSERT INTO ${t.snapshots} AS s (execution_id, seq, state)
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])
       ON CONFLICT (execution_id) DO UPDATE SET seq = excluded.seq, state = excluded.state
       WHERE excluded.seq >= s.seq`,
    ),
    // A notice to an owner that never takes it (it died) is dropped after a day.
    notices: statement(
      "notices_with_batch",
      `WITH pruned AS (DELETE FROM ${t.notices} WHERE at < $1)
       INSERT INTO ${t.notices} (owner, execution_id, kind, at)
       SELECT owner, id, kind, at
       FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[]) WITH ORDINALITY
         AS n(owner, id, kind, at, i)
       ORDER BY i`,
    ),
    // S15: an execution's end clears its own waits' rows, never the wake rows others wrote for it.
    clearAllTimers: statement(
      "clear_all_timers",
      `DELETE FROM ${t.timers} WHERE execution_id = ANY($1::text[])
       AND timer_id NOT LIKE 'child:%' AND timer_id NOT LIKE 'cascade:%'
       AND timer_id NOT LIKE 'watch:%'`,
    ),
    clearTimers: statement(
      "clear_timers",
      `DELETE FROM ${t.timers} AS tm USING unnest($1::text[], $2::text[]) AS d(id, timer)
       WHERE tm.execution_id = d.id AND tm.timer_id = d.timer`,
    ),
    setTimers: statement(
      "set_timers",
      `INSERT INTO ${t.timers} (execution_id, timer_id, wake_at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
       ON CONFLICT (execution_id, timer_id) DO UPDATE SET wake_at = excluded.wake_at`,
    ),
    notify: statement("notify", "SELECT pg_notify($1, w) FROM unnest($2::text[]) AS w"),
  };

  /** A1, A2: locks the rows and reads what they hold. */
  async function lock(tx: Tx, ids: string[]): Promise<Map<string, Known>> {
    // Both sent at once (db.ts D4); PostgreSQL runs the second after the first holds its locks.
    const [leases, executions] = await Promise.all([
      tx.query<{ execution_id: string; owner: string | null; fence: number }>(s.lockLeases([ids])),
      tx.query<{ id: string; status: ExecutionStatus; head: number }>(s.lockExecutions([ids])),
    ]);
    const known = new Map<string, Known>();
    for (const id of ids) {
      known.set(id, { head: -1, status: undefined, fence: undefined, owner: undefined });
    }
    for (const r of leases.rows) {
      const k = known.get(r.execution_id);
      if (k) Object.assign(k, { fence: r.fence, owner: r.owner ?? undefined });
    }
    for (const r of executions.rows) {
      const k = known.get(r.id);
      if (k) Object.assign(k, { head: r.head, status: r.status });
    }
    return known;
  }

  /** A3: checks one batch; adds what it writes to `plan`, or throws the LoomError refusing it. */
  async function accept(tx: Tx, b: AppendBatch, k: Known, plan: WritePlan) {
    assertStorable(b);
    checkBatch(b, k.head, effectiveFence(b, k.fence), k.status);
    const id = b.executionId;
    if (k.fence === undefined && b.claimLease) {
      const claimed = await tx.query(
        s.claim([id, b.claimLease.owner, b.fence, b.claimLease.expiresAtMs]),
      );
      if (claimed.rowCount !== 1) {
        throw new FencedError(
          `append to ${id} with fence ${b.fence} refused: another owner created its lease meanwhile`,
          { executionId: id, fence: b.fence, leaseFence: null },
        );
      }
      Object.assign(k, { fence: b.fence, owner: b.claimLease.owner });
    }
    const first = b.events[0] as Envelope;
    const last = b.events[b.events.length - 1] as Envelope;
    plan.events.push(...b.events);
    const row = plan.executions.get(id);
    plan.executions.set(id, {
      flow: row?.flow ?? b.flow ?? "",
      status: b.status,
      head: last.seq,
      createdAtMs: row?.createdAtMs ?? first.at,
      updatedAtMs: last.at,
    });
    Object.assign(k, { head: last.seq, status: b.status });
    if (b.releaseLease !== undefined && b.releaseLease === k.owner && b.fence === k.fence) {
      plan.releases.push({ id, owner: b.releaseLease, fence: b.fence });
      k.owner = undefined;
    }
    const snap = b.snapshot;
    if (snap && snap.seq >= (plan.snapshots.get(id)?.seq ?? -Infinity)) {
      plan.snapshots.set(id, { seq: snap.seq, state: snap.stateJson });
    }
    if (b.notice) {
      plan.pruneNoticesBeforeMs = Math.max(plan.pruneNoticesBeforeMs, last.at - NOTICE_TTL_MS);
      plan.notices.push({ owner: b.notice.owner, id, kind: b.notice.kind, atMs: last.at });
      plan.wakes.push({ kind: "notice", owner: b.notice.owner, executionId: id });
    }
    plan.timers.add(b);
    if ((b.status === "pending" || b.status === "running") && k.owner === undefined) {
      plan.wakes.push({ kind: "runnable", executionId: id });
    }
  }

  /** A4. */
  function write(tx: Tx, plan: WritePlan): void {
    const ev = plan.events;
    const ex = [...plan.executions];
    tx.send(
      s.write([
        ev.map((e) => e.executionId),
        ev.map((e) => e.seq),
        ev.map((e) => e.kind),
        ev.map((e) => e.at),
        ev.map((e) => jsonText(e.payload)),
        ev.map((e) => (e.meta === undefined ? null : JSON.stringify(e.meta))),
        ex.map(([id]) => id),
        ex.map(([, x]) => x.flow),
        ex.map(([, x]) => x.status),
        ex.map(([, x]) => x.head),
        ex.map(([, x]) => x.createdAtMs),
        ex.map(([, x]) => x.updatedAtMs),
      ]),
    );
    const r = plan.releases;
    if (r.length) {
      tx.send(s.release([r.map((x) => x.id), r.map((x) => x.owner), r.map((x) => x.fence)]));
    }
    const snaps = [...plan.snapshots];
    if (snaps.length) {
      tx.send(
        s.snapshot([
          snaps.map(([id]) => id),
          snaps.map(([, x]) => x.seq),
          snaps.map(([, x]) => x.state),
        ]),
      );
    }
    const n = plan.notices;
    if (n.length) {
      tx.send(
        s.notices([
          plan.pruneNoticesBeforeMs,
          n.map((x) => x.owner),
          n.map((x) => x.id),
          n.map((x) => x.kind),
          n.map((x) => x.atMs),
        ]),
      );
    }
    writeTimers(tx, plan);
    const texts = [...new Set(plan.wakes.flatMap((w) => wakeText(w) ?? []))];
    if (texts.length) tx.send(s.notify([channel, texts]));
  }

  function writeTimers(tx: Tx, plan: WritePlan): void {
    const { clearedAll, deleted, set } = plan.timers;
    if (clearedAll.size) tx.send(s.clearAllTimers([[...clearedAll]]));
    if (deleted.length) {
      tx.send(s.clearTimers([deleted.map((d) => d.executionId), deleted.map((d) => d.timerId)]));
    }
    if (set.length) {
      tx.send(
        s.setTimers([
          set.map((x) => x.executionId),
          set.map((x) => x.timerId),
          set.map((x) => x.wakeAtMs),
        ]),
      );
      for (const x of set) {
        plan.wakes.push({ kind: "timer", executionId: x.executionId, wakeAtMs: x.wakeAtMs });
      }
    }
  }

  return async (batches) => {
    if (batches.length === 0) return [];
    const ids = [...new Set(batches.map((b) => b.executionId))];
    try {
      return await transaction(pool, async (tx) => {
        const known = await lock(tx, ids);
        const plan = new WritePlan();
        const outcomes: AppendOutcome[] = [];
        for (const b of batches) {
          try {
            await accept(tx, b, known.get(b.executionId) as Known, plan);
            outcomes.push({ ok: true });
          } catch (e) {
            if (!(e instanceof LoomError)) throw e;
            outcomes.push({ ok: false, error: e });
          }
        }
        if (plan.events.length) write(tx, plan);
        hooks.beforeCommit?.(batches);
        return outcomes;
      });
    } catch (e) {
      throw ensureError(e);
    }
  };
}

/**
 * What PostgreSQL could not store, refused per batch (InvalidInputError) before it could fail
 * the whole group: a NUL character in a text column, a time that is no safe integer.
 */
function assertStorable(b: AppendBatch): void {
  const texts: (string | undefined)[] = [
    b.executionId,
    b.flow,
    b.releaseLease,
    b.claimLease?.owner,
    b.notice?.owner,
    b.snapshot?.stateJson,
    ...b.events.map((e) => e.kind),
    ...(b.index?.timersCleared ?? []),
    ...(b.index?.timersSet ?? []).map((x) => x.timerId),
    ...(b.index?.wakes ?? []).flatMap((x) => [x.executionId, x.timerId]),
  ];
  const bad = texts.find((x) => x?.includes("\u0000"));
  if (bad !== undefined) {
    throw new InvalidInputError(
      `append batch for ${JSON.stringify(b.executionId)} holds a NUL character`,
      {
        executionId: b.executionId,
      },
    );
  }
  const numbers: (number | undefined)[] = [
    b.claimLease?.expiresAtMs,
    b.snapshot?.seq,
    ...b.events.map((e) => e.at),
    ...(b.index?.timersSet ?? []).map((x) => x.wakeAtMs),
    ...(b.index?.wakes ?? []).map((x) => x.wakeAtMs),
  ];
  const odd = numbers.find((x) => x !== undefined && !Number.isSafeInteger(x));
  if (odd !== undefined) {
    throw new InvalidInputError(
      `append batch for ${JSON.stringify(b.executionId)} holds ${odd}, where a time or sequence number must be a safe integer`,
      { executionId: b.executionId },
    );
  }
}
