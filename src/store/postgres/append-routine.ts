/**
 * The append routine: a PL/pgSQL function in the store's schema that makes a whole group commit
 * (S4) one statement, so `appendMany` costs one round trip and commits on its own (autocommit).
 * append.ts says what it is sent and reads what it answers; this file is the SQL, built from named
 * fragments in the order they run (a batch's writes, after its checks: append-routine-writes.ts).
 *
 * R1. It is installed beside the migrations, under their lock (migrations.ts M3), and named with
 *     its version (`loom_append_8`). A changed routine is a new name, never a replaced body: a
 *     process of the previous release, still running during a rolling upgrade, keeps the routine
 *     it was written for (or its own two-round-trip transaction, which takes the same locks in the
 *     same order).
 * R2. It locks, FOR UPDATE and sorted by execution id, the lease rows and then the execution rows
 *     of every execution in the call (append.ts A1) and reads them, in two statements, the second
 *     run after the first holds its locks, so it reads what a previous lease holder committed
 *     while it waited (A2). A call for one execution (a sequential step: the most common, and the
 *     one whose latency counts) has nothing to sort, and locks its two rows as it reads them, at
 *     each batch (the execution row as R8 says). Plans are generic: replanning each call cost as
 *     much as running it.
 * R3. It then takes the batches in order, each on its own, against what the locked rows held and
 *     what the batches before it in the call did: it refuses a batch, which then writes nothing,
 *     when the fence, a terminal status or the expected sequence number says so (append-check.ts,
 *     in its order; an ended log takes a batch of SUBJECT_ERASED events only that keeps its
 *     status, S20); otherwise it applies it whole, in its turn: a claimed lease (created only if
 *     no row exists, else the batch is fenced), its events and execution row (R4), a released
 *     lease, a snapshot never over a newer one, a notice, its timer rows (its net effect, computed
 *     by the client: timer-plan.ts), and its wakes with `pg_notify` (wakes.ts N1). Applying
 *     batches in order is what the other stores do, so what a call leaves is the same.
 * R4. A call for one execution writes each batch's events and execution row as it goes (three
 *     statements for a step: R8). A call for several keeps each execution's state in arrays lined up
 *     with the call's ids, and writes the events and execution rows of all its accepted batches
 *     after the loop, in two or three statements whatever their number.
 * R5. It answers the refused batches only, as JSON `[{n, h, s, f}]`: the batch's place in the call
 *     and the head, status and lease fence it was checked against, from which the client builds
 *     the same typed error the other stores raise (append-check.ts checkBatch); `{n, c: true}` is
 *     a claim that lost the race to create the lease row.
 * R6. Payloads, metas and snapshot states arrive as JSON strings holding the text the runtime
 *     made, so the row holds that text byte for byte (a `\u0000` escape in it included).
 * R7. It runs under its own `search_path` (`pg_catalog`, the store's schema, then `pg_temp`),
 *     set on the function, never the caller's: a function or operator that someone created in a
 *     schema on a session's path (an overload of `cardinality(text[])` that matches more exactly
 *     than pg_catalog's, say) is never what it calls. Its tables are qualified as well.
 * R8. (Since `loom_append_4`.) In a call for one execution, a batch that claims no lease and
 *     carries the locked lease's fence updates its execution row in one statement whose WHERE is
 *     the rest of the check (the row's head is the batch's expected sequence number less one,
 *     its status not terminal): that UPDATE locks the row, after the lease as R2 orders them,
 *     and reads its latest version (PostgreSQL re-checks a row changed while it waited), so a
 *     step costs no separate locked read of the row, and one WAL record less (a sequential step
 *     is 2.3x a raw insert otherwise: docs/benchmarks.md). A batch the UPDATE does not take (a
 *     first batch, a claim, an erasure after the end, or one to refuse) writes nothing there and
 *     is read and checked as before, so a refusal answers what it was checked against (R5).
 *     (A call of one step, end or start now goes first to the client's fast path, append-fast.ts,
 *     one plain statement taking the same locks in the same order; the routine gets what that
 *     does not take, every other call, and the calls of a previous release's processes.)
 * R9. (Since `loom_append_6`.) Every accepted batch leaves its lease row's `runnable` flag equal to
 *     whether the batch's status is pending or running (leases.ts L4): a claimed lease row is
 *     created with it, a release writes it, and otherwise the row is updated only when the flag
 *     changes (a start, an end, a park or a wake; never a step that stays running). The flag is
 *     read with the lease row's lock (R2), so it is the committed one, and the write is in the
 *     batch's transaction, so the flag and the status commit together.
 * R10. (Since `loom_append_7`.) Events are rows of the lean format (event-rows.ts E1..E4): each
 *     event arrives with its kind's code or name and its bare fence or meta text (append.ts
 *     computes them), and is written under its execution's key, so after the execution row
 *     that holds it: a new execution's row is inserted before its events.
 * R11. (Since `loom_append_8`.) A fork's batch (`fo`, store S21) writes its row under its origin
 *     with its timer rows, in its turn: only if it is accepted. The fast path never takes one
 *     (append-fast.ts F1), so every fork goes through here.
 * R12. (Since `loom_append_8`.) The execution row keeps the principal of the batch that inserts
 *     it and, from every batch that carries one (`sp`), what was spent (spi.ts S24); a batch
 *     without leaves the row's as it was (append-routine-writes.ts SPENT_SETS).
 * R13. (Since `loom_append_9`.) The execution row keeps the queue entry of the batch that inserts
 *     it (`qn` name, `qk` key, `qp` priority, `qd` dedupe, `qb` not-before) and a later batch's
 *     `qb` when it carries a queue (S28, QUEUE_SETS). A new execution with a dedupe key first
 *     takes a transaction-scoped advisory lock named after the schema, queue and key, then looks
 *     for a queued execution of the queue holding the key, among the rows committed (each
 *     statement of the routine reads the latest: READ COMMITTED) and the batches accepted before
 *     it in the call; found, the batch is refused (R5 `{n, d: existingId}`) having written nothing
 *     (S27). Two calls recording one key wait for each other on the lock, so the second sees the
 *     first's row; the unique index of migration 7 is only a safety net.
 * R14. (Since `loom_append_9`.) A batch wakes its queue's admitters (S18 `queue`) when it records a
 *     queued execution, ends an execution of a queue, or releases its lease.
 */
import { TERMINAL_STATUSES } from "../../kernel/events.ts";
import { ERASURE_KIND } from "../append-check.ts";
import { kindCode } from "../kind-codes.ts";
import { APPEND_ROUTINE, type Tables } from "./tables.ts";
import {
  batchWrites,
  EVENT_INSERT_COLUMNS,
  EVENT_RECORD,
  EVENT_VALUES,
  QUEUE_COLUMNS,
  QUEUE_SETS,
  SPENT_COLUMNS,
  SPENT_SETS,
} from "./append-routine-writes.ts";

export { APPEND_ROUTINE } from "./tables.ts";

/** What `to_regprocedure` needs to find it. */
export const APPEND_ROUTINE_ARGS = "(text[], json, bigint)";

const quoted = (values: Iterable<string>) => [...values].map((v) => `'${v}'`).join(", ");

/**
 * The CREATE FUNCTION statement for `schema`. The batch record's fields (append.ts `SentBatch`):
 * i id, x expected sequence, f fence, s status, fl flow, h last sequence, a0/a1 first and last
 * event time, e events ({q seq, k kind code, kn kind name without one, t at, p payload, f bare
 * fence, m meta text}: event-rows.ts EventCells), co/ce claimed lease owner and
 * expiry, r released lease owner, ss/sj snapshot sequence and state, nw/nk notice owner (who) and
 * kind, tc clear all own timer rows, td timer rows deleted ({e, t}), ts timer rows set ({e, t, a}),
 * fo/fp a fork's origin and fork point (S21), pr principal, sp whether spent is carried,
 * sc/su/st its cost, cost unknown and tokens (R12), qn/qk/qp/qd/qb its queue entry (R13).
 * `x`, `f` and `h` are numeric: a fence or sequence number no row can hold refuses its batch only
 * (as a mismatch), and is never cast to BIGINT.
 */
export function appendRoutineSql(t: Tables, schema: string, channel: string): string {
  return [
    signature(schema),
    declarations(),
    "BEGIN",
    lockRows(t),
    batchLoop(),
    batchState(t),
    batchCheck(),
    queueCheck(t, schema),
    ...batchWrites(t, channel),
    "  END LOOP;",
    writeAppended(t),
    answer(),
  ].join("\n");
}

/** The function's name, arguments and settings (R1, R2: generic plans, R7: its own path). */
function signature(schema: string): string {
  return `
CREATE FUNCTION "${schema}".${APPEND_ROUTINE}(ids text[], batches json, prune_notices_before bigint)
RETURNS json LANGUAGE plpgsql
-- Every statement below is a primary-key lookup or a write: a generic plan is the right one, and
-- replanning "= ANY(ids)" at each call (a custom plan) would cost as much as running it.
SET plan_cache_mode = force_generic_plan
-- R7: names resolve in pg_catalog first, whatever the calling session's search_path holds;
-- pg_temp last, so a temporary object shadows nothing.
SET search_path = pg_catalog, "${schema}", pg_temp
AS $routine$`;
}

/** The routine's variables: the batch's execution as checked, and a call for several's (R4). */
function declarations(): string {
  return `DECLARE
  single boolean := cardinality(ids) = 1;
  b record;
  k int := -1;
  j int;
  p int;
  -- The batch's execution as the locked rows and the batches before it left it.
  lease_fence bigint;
  lease_owner text;
  -- R9: the lease row's runnable flag, as the batches so far left it.
  lease_runnable boolean;
  log_head bigint;
  log_status text;
  -- R10: the execution's key (executions.n), once its row is written or read.
  log_key bigint;
  checked_fence bigint;
  -- R8: whether the batch's execution row was written as it was checked.
  written boolean;
  -- R13, R14: the batch's execution is new, its queue, and a queued holder of its dedupe key.
  is_new boolean;
  log_queue text;
  dup_id text;
  dedupe_keys text[] := '{}';
  dedupe_ids text[] := '{}';
  -- Several executions (R4): the locked rows, in id order...
  locked_leases text[];
  locked_fences bigint[];
  locked_owners text[];
  locked_runnables boolean[];
  locked_executions text[];
  locked_heads bigint[];
  locked_statuses text[];
  locked_queues text[];
  -- ...each execution as the batches so far left it, by its place in ids (a batch's j)...
  seen boolean[];
  fences bigint[];
  owners text[];
  runnables boolean[];
  heads bigint[];
  statuses text[];
  fresh boolean[];
  flows text[];
  principals text[];
  spents boolean[];
  costs float8[];
  unknowns boolean[];
  spent_tokens float8[];
  created bigint[];
  updated bigint[];
  -- R13: each execution's queue entry (a new one's), its not-before, and whether a batch set it.
  xqueues text[];
  qkeys text[];
  qprios float8[];
  qdedupes text[];
  qnbs bigint[];
  qsets boolean[];
  -- ...and the accepted batches' events.
  appended_ids text[] := '{}';
  appended_events json[] := '{}';
  refused json[] := '{}';
  pruned boolean := prune_notices_before IS NULL;`;
}

/** R2, for several executions: every lease row, then every execution row, locked in id order. */
function lockRows(t: Tables): string {
  return `  IF NOT single THEN
    -- One element per execution from the start: an element assigned past the end of an empty
    -- array would make it start there, and unnest would no longer line it up with ids.
    seen := array_fill(NULL::boolean, ARRAY[cardinality(ids)]);
    fences := array_fill(NULL::bigint, ARRAY[cardinality(ids)]);
    owners := array_fill(NULL::text, ARRAY[cardinality(ids)]);
    runnables := array_fill(NULL::boolean, ARRAY[cardinality(ids)]);
    heads := array_fill(NULL::bigint, ARRAY[cardinality(ids)]);
    statuses := array_fill(NULL::text, ARRAY[cardinality(ids)]);
    fresh := array_fill(NULL::boolean, ARRAY[cardinality(ids)]);
    flows := array_fill(NULL::text, ARRAY[cardinality(ids)]);
    principals := array_fill(NULL::text, ARRAY[cardinality(ids)]);
    spents := array_fill(false, ARRAY[cardinality(ids)]);
    costs := array_fill(NULL::float8, ARRAY[cardinality(ids)]);
    unknowns := array_fill(NULL::boolean, ARRAY[cardinality(ids)]);
    spent_tokens := array_fill(NULL::float8, ARRAY[cardinality(ids)]);
    created := array_fill(NULL::bigint, ARRAY[cardinality(ids)]);
    updated := array_fill(NULL::bigint, ARRAY[cardinality(ids)]);
    xqueues := array_fill(NULL::text, ARRAY[cardinality(ids)]);
    qkeys := array_fill(NULL::text, ARRAY[cardinality(ids)]);
    qprios := array_fill(NULL::float8, ARRAY[cardinality(ids)]);
    qdedupes := array_fill(NULL::text, ARRAY[cardinality(ids)]);
    qnbs := array_fill(NULL::bigint, ARRAY[cardinality(ids)]);
    qsets := array_fill(false, ARRAY[cardinality(ids)]);
    -- R2
    SELECT array_agg(l.execution_id), array_agg(l.fence), array_agg(l.owner),
        array_agg(l.runnable)
      INTO locked_leases, locked_fences, locked_owners, locked_runnables
      FROM (SELECT execution_id, fence, owner, runnable FROM ${t.leases} WHERE execution_id = ANY(ids)
            ORDER BY execution_id FOR UPDATE) AS l;
    SELECT array_agg(x.id), array_agg(x.head), array_agg(x.status), array_agg(x.queue)
      INTO locked_executions, locked_heads, locked_statuses, locked_queues
      FROM (SELECT id, head, status, queue FROM ${t.executions} WHERE id = ANY(ids)
            ORDER BY id FOR UPDATE) AS x;
  END IF;`;
}

/** R3: the batches in order, each read as a record (the fields of `appendRoutineSql`'s doc). */
function batchLoop(): string {
  return `  -- R3
  FOR b IN SELECT * FROM json_to_recordset(batches) AS q(i text, j int, x numeric, f numeric,
      s text, fl text, h numeric, a0 bigint, a1 bigint, e json, co text, ce bigint, r text,
      ss bigint, sj text, nw text, nk text, tc boolean, td json, ts json, fo text, fp bigint,
      pr text, sp boolean, sc float8, su boolean, st float8, qn text, qk text, qp float8,
      qd text, qb bigint)
  LOOP
    k := k + 1;
    j := b.j;`;
}

/** R2: the batch's execution as the locked rows, and the batches before it, left it. */
function batchState(t: Tables): string {
  const terminal = quoted(TERMINAL_STATUSES);
  return `    written := false;
    IF single THEN
      -- R2, for one execution: its rows, locked as they are read; the batches before this one
      -- in the call wrote theirs already.
      SELECT l.fence, l.owner, l.runnable INTO lease_fence, lease_owner, lease_runnable
        FROM ${t.leases} l
        WHERE l.execution_id = b.i FOR UPDATE;
      -- R8: a batch that claims nothing, under its fence, writes its execution row at once if
      -- the row takes it (the next sequence number, no terminal status): that UPDATE locks and
      -- checks the row. Anything else reads the row locked, and is checked below.
      IF b.co IS NULL AND lease_fence = b.f THEN
        UPDATE ${t.executions} AS x SET status = b.s, head = b.h, updated_at = b.a1,
          ${SPENT_SETS}, ${QUEUE_SETS}
          WHERE x.id = b.i AND x.head = b.x - 1 AND x.status NOT IN (${terminal})
          RETURNING x.n, x.queue INTO log_key, log_queue;
        written := FOUND;
      END IF;
      IF written THEN
        log_head := b.x - 1;
      ELSE
        SELECT x.head, x.status, x.n, x.queue INTO log_head, log_status, log_key, log_queue
          FROM ${t.executions} x WHERE x.id = b.i FOR UPDATE;
        log_head := coalesce(log_head, -1);
      END IF;
    ELSE
      IF seen[j] IS NULL THEN
        seen[j] := true;
        p := array_position(locked_leases, b.i);
        fences[j] := locked_fences[p];
        owners[j] := locked_owners[p];
        runnables[j] := locked_runnables[p];
        p := array_position(locked_executions, b.i);
        heads[j] := coalesce(locked_heads[p], -1);
        statuses[j] := locked_statuses[p];
        fresh[j] := p IS NULL;
        xqueues[j] := locked_queues[p];
      END IF;
      lease_fence := fences[j];
      lease_owner := owners[j];
      lease_runnable := runnables[j];
      log_head := heads[j];
      log_status := statuses[j];
      log_queue := xqueues[j];
    END IF;`;
}

/** R3, R5: the fence, terminal and sequence checks; a refused batch is answered, not applied. */
function batchCheck(): string {
  const terminal = quoted(TERMINAL_STATUSES);
  return `    -- append-check.ts effectiveFence and checkBatch, in their order. An ended log takes a batch
    -- of erasures that keeps its status (erasureOf, S20); CASE reads the events only then. (In
    -- parentheses: PL/pgSQL ends an IF's condition at the first THEN outside them.)
    -- R8: a batch written already passed them all.
    checked_fence := CASE WHEN written THEN b.f WHEN b.co IS NULL THEN lease_fence
      WHEN lease_fence IS NULL AND b.f = 1 THEN 1 END;
    IF checked_fence IS NULL OR checked_fence IS DISTINCT FROM b.f
        OR (CASE WHEN NOT written AND coalesce(log_status IN (${terminal}), false)
          THEN b.s IS DISTINCT FROM log_status OR EXISTS (SELECT FROM json_array_elements(b.e) AS ev
            WHERE (ev ->> 'k') IS DISTINCT FROM '${kindCode(ERASURE_KIND)}')
          ELSE false END)
        OR b.x IS DISTINCT FROM log_head + 1 THEN
      refused := refused || json_build_object('n', k, 'h', log_head, 's', log_status,
        'f', lease_fence);
      CONTINUE;
    END IF;`;
}

/** R13, S27: a new execution's dedupe key, refused when a queued execution holds it. */
function queueCheck(t: Tables, schema: string): string {
  return `    is_new := NOT written AND log_status IS NULL;
    IF is_new AND b.qd IS NOT NULL AND b.qn IS NOT NULL THEN
      PERFORM pg_advisory_xact_lock(hashtextextended('loom.dedupe:${schema}:' || b.qn || ':' || b.qd, 0));
      dup_id := dedupe_ids[array_position(dedupe_keys, json_build_array(b.qn, b.qd)::text)];
      IF dup_id IS NULL THEN
        SELECT x.id INTO dup_id FROM ${t.executions} x
          WHERE x.queue = b.qn AND x.queue_dedupe = b.qd AND x.status = 'queued' LIMIT 1;
      END IF;
      IF dup_id IS NOT NULL THEN
        refused := refused || json_build_object('n', k, 'd', dup_id);
        CONTINUE;
      END IF;
    END IF;`;
}

/** R4, for several executions: the accepted batches' events and execution rows, after the loop. */
function writeAppended(t: Tables): string {
  return `  -- R4
  IF cardinality(appended_ids) > 0 THEN
    UPDATE ${t.executions} AS x SET status = w.status, head = w.head, updated_at = w.updated,
        -- R12
        cost_usd = CASE WHEN w.sp THEN w.cost ELSE x.cost_usd END,
        cost_unknown = CASE WHEN w.sp THEN w.unknown ELSE x.cost_unknown END,
        tokens = CASE WHEN w.sp THEN w.tokens ELSE x.tokens END,
        -- R13
        queue_not_before = CASE WHEN w.qset AND x.queue IS NOT NULL THEN w.qnb
          ELSE x.queue_not_before END
      FROM unnest(ids, fresh, statuses, heads, updated, spents, costs, unknowns, spent_tokens,
          qsets, qnbs)
        AS w(id, fresh, status, head, updated, sp, cost, unknown, tokens, qset, qnb)
      WHERE x.id = w.id AND NOT w.fresh AND w.updated IS NOT NULL;
    IF true = ANY(fresh) THEN
      INSERT INTO ${t.executions} (id, flow, status, head, created_at, updated_at, ${SPENT_COLUMNS},
          ${QUEUE_COLUMNS})
        SELECT w.id, w.flow, w.status, w.head, w.created, w.updated, w.principal, w.cost,
          w.unknown, w.tokens, w.queue, w.qkey, w.qprio, w.qdedupe, w.qnb
        FROM unnest(ids, fresh, flows, statuses, heads, created, updated, principals, costs,
            unknowns, spent_tokens, xqueues, qkeys, qprios, qdedupes, qnbs)
          AS w(id, fresh, flow, status, head, created, updated, principal, cost, unknown, tokens,
            queue, qkey, qprio, qdedupe, qnb)
        WHERE w.fresh AND w.updated IS NOT NULL;
    END IF;
    -- R10: after the execution rows, whose keys they take.
    INSERT INTO ${t.events} (${EVENT_INSERT_COLUMNS})
      SELECT x.n, ${EVENT_VALUES}
      FROM unnest(appended_ids, appended_events) AS a(id, e)
        JOIN ${t.executions} AS x ON x.id = a.id,
        json_to_recordset(a.e) AS ${EVENT_RECORD};
  END IF;`;
}

/** R5: the refused batches only. */
function answer(): string {
  return `  -- R5
  RETURN array_to_json(refused);
END
$routine$`;
}
