/**
 * The append routine's writes of one accepted batch: the part of its loop body (append-routine.ts
 * R3) that follows the checks, as fragments of PL/pgSQL in the order the routine runs them. The
 * variables they use (`b` the batch record, `j` its execution's place in the call, `lease_owner`,
 * `lease_fence`, `log_status`, the arrays of a call for several) are declared by the routine.
 *
 * The invariants are the routine's, kept here:
 * - R3: a claimed lease is created only where no lease row exists; a claim that finds one is
 *   refused (R5 `{n, c: true}`) having written nothing (S3). A release, snapshot (S8), notice
 *   (S10), timer rows (S7, S15) and fork row (R11, S21) are the batch's, in its turn.
 * - R9: every accepted batch leaves its lease row's `runnable` flag equal to whether its status is
 *   pending or running: set where the lease row is created or released, else where it changes.
 * - R4: one execution's events and execution row are written as its batch is taken; a call for
 *   several keeps them for the routine's writes after its loop.
 * - R10: the events are written after their execution row, under the key it holds.
 * - R12: the execution row takes the batch's principal when it is inserted, and its spent
 *   whenever the batch carries one (`sp`); otherwise it keeps what it had.
 * - wakes.ts N1, N2: every wake goes out with `pg_notify` in the call's transaction, so only if the
 *   batch commits, and not at all when its JSON is over PostgreSQL's payload limit.
 */
import { TERMINAL_STATUSES } from "../../kernel/events.ts";
import { RUNNABLE_SQL, type Tables } from "./tables.ts";

const quoted = (values: Iterable<string>) => [...values].map((v) => `'${v}'`).join(", ");
import { MAX_PAYLOAD_BYTES } from "./wakes.ts";
import { NOT_A_WAKE_ROW } from "../rows.ts";

/** R10: the events table's columns an append writes, the key first (event-rows.ts E1..E4). */
export const EVENT_INSERT_COLUMNS = "x, seq, at, fence, kind, kind_name, payload, meta";

/** R10: the values after the key, from an event record `ev` (`EVENT_RECORD`). */
export const EVENT_VALUES = "ev.q, ev.t, ev.f, ev.k, ev.kn, ev.p, ev.m";

/** R10: an event as the routine receives it (event-rows.ts EventCells, append.ts). */
export const EVENT_RECORD =
  "ev(q bigint, k smallint, kn text, t bigint, p text, f integer, m text)";

/** R12: the executions row's S24 columns, as an insert names them. */
export const SPENT_COLUMNS = "principal, cost_usd, cost_unknown, tokens";

/** R12: what a batch that carries `spent` (`b.sp`) sets on its execution row `x`; else kept. */
export const SPENT_SETS = `cost_usd = CASE WHEN b.sp THEN b.sc ELSE x.cost_usd END,
          cost_unknown = CASE WHEN b.sp THEN b.su ELSE x.cost_unknown END,
          tokens = CASE WHEN b.sp THEN b.st ELSE x.tokens END`;

/** R13: the executions row's queue columns, as an insert names them. */
export const QUEUE_COLUMNS = "queue, queue_key, queue_priority, queue_dedupe, queue_not_before";

/** R13, S28: a later batch's queue moves the not-before time of its execution row `x`. */
export const QUEUE_SETS = `queue_not_before = CASE WHEN b.qn IS NOT NULL AND x.queue IS NOT NULL
          THEN b.qb ELSE x.queue_not_before END`;

/** The writes of an accepted batch, in order (R3). */
export function batchWrites(t: Tables, channel: string): string[] {
  const notify = notifier(channel);
  return [
    claimLease(t),
    appendEvents(t),
    releaseLease(t),
    syncRunnable(t),
    saveSnapshot(t),
    postNotice(t, notify),
    timerRows(t, channel),
    forkRow(t),
    runnableWake(notify),
    queueWake(notify),
  ];
}

/** R11, S21: a fork's row under its origin. */
function forkRow(t: Tables): string {
  return `    IF b.fo IS NOT NULL THEN
      INSERT INTO ${t.forks} (origin_id, fork_id, seq) VALUES (b.fo, b.i, b.fp);
    END IF;`;
}

/** N2: `PERFORM`s a wake built as JSON; one over PostgreSQL's payload limit is not sent (N2). */
type Notify = (wake: string) => string;

function notifier(channel: string): Notify {
  return (wake) =>
    `PERFORM pg_notify('${channel}', w) FROM (SELECT (${wake})::text AS w) AS wake
        WHERE octet_length(w) <= ${MAX_PAYLOAD_BYTES}`;
}

/** R3, S3: a claimed lease is created only where no row exists; else the claim lost (R5 `c`). */
function claimLease(t: Tables): string {
  return `    IF b.co IS NOT NULL THEN
      INSERT INTO ${t.leases} (execution_id, owner, fence, expires_at, runnable)
        VALUES (b.i, b.co, 1, b.ce, b.s IN (${RUNNABLE_SQL}))
        ON CONFLICT (execution_id) DO NOTHING;
      IF NOT FOUND THEN
        refused := refused || json_build_object('n', k, 'c', true);
        CONTINUE;
      END IF;
      lease_fence := 1;
      lease_owner := b.co;
      lease_runnable := b.s IN (${RUNNABLE_SQL});
    END IF;`;
}

/** R4: one execution's events and row written now; several's kept for `writeAppended`. */
function appendEvents(t: Tables): string {
  return `    IF single THEN
      IF written THEN
        NULL; -- R8: its execution row was written as it was checked.
      ELSIF log_status IS NULL THEN
        INSERT INTO ${t.executions} (id, flow, status, head, created_at, updated_at, ${SPENT_COLUMNS},
            ${QUEUE_COLUMNS})
          VALUES (b.i, coalesce(b.fl, ''), b.s, b.h, b.a0, b.a1, b.pr, b.sc, b.su, b.st, b.qn, b.qk,
            b.qp, b.qd, b.qb)
          RETURNING n INTO log_key;
      ELSE
        UPDATE ${t.executions} AS x SET status = b.s, head = b.h, updated_at = b.a1,
          ${SPENT_SETS}, ${QUEUE_SETS} WHERE id = b.i;
      END IF;
      -- R10: under the key the execution row holds, so after it.
      INSERT INTO ${t.events} (${EVENT_INSERT_COLUMNS})
        SELECT log_key, ${EVENT_VALUES} FROM json_to_recordset(b.e) AS ${EVENT_RECORD};
    ELSE
      appended_ids := appended_ids || b.i;
      appended_events := appended_events || b.e;
      IF log_status IS NULL THEN
        flows[j] := coalesce(b.fl, '');
        created[j] := b.a0;
        principals[j] := b.pr;
        -- R13: a new execution's queue entry.
        qkeys[j] := b.qk;
        qprios[j] := b.qp;
        qdedupes[j] := b.qd;
        qnbs[j] := b.qb;
      ELSIF b.qn IS NOT NULL THEN
        qsets[j] := true;
        qnbs[j] := b.qb;
      END IF;
      IF b.sp THEN
        spents[j] := true;
        costs[j] := b.sc;
        unknowns[j] := b.su;
        spent_tokens[j] := b.st;
      END IF;
      heads[j] := b.h;
      statuses[j] := b.s;
      updated[j] := b.a1;
    END IF;`;
}

/** S9: the batch's release, if its owner holds the lease; the lease kept for the next batch. */
function releaseLease(t: Tables): string {
  return `    IF b.r IS NOT NULL AND b.r = lease_owner THEN
      -- R9: the flag in the same row version.
      UPDATE ${t.leases} SET owner = NULL, runnable = b.s IN (${RUNNABLE_SQL})
        WHERE execution_id = b.i;
      lease_owner := NULL;
      lease_runnable := b.s IN (${RUNNABLE_SQL});
    END IF;
    IF NOT single THEN
      fences[j] := lease_fence;
      owners[j] := lease_owner;
    END IF;`;
}

/**
 * R9: the lease row's `runnable` flag follows the batch's status, written only when it changes.
 * (A batch accepted has a lease row: its fence was checked against it.)
 */
function syncRunnable(t: Tables): string {
  return `    IF (b.s IN (${RUNNABLE_SQL})) IS DISTINCT FROM lease_runnable THEN
      UPDATE ${t.leases} SET runnable = b.s IN (${RUNNABLE_SQL}) WHERE execution_id = b.i;
      lease_runnable := b.s IN (${RUNNABLE_SQL});
    END IF;
    IF NOT single THEN
      runnables[j] := lease_runnable;
    END IF;`;
}

/** S8: a snapshot never replaces a newer one. */
function saveSnapshot(t: Tables): string {
  return `    IF b.ss IS NOT NULL THEN
      INSERT INTO ${t.snapshots} AS sn (execution_id, seq, state) VALUES (b.i, b.ss, b.sj)
        ON CONFLICT (execution_id) DO UPDATE SET seq = excluded.seq, state = excluded.state
        WHERE excluded.seq >= sn.seq;
    END IF;`;
}

/** S10, S18: a notice, its owner woken; the day-old notices pruned once per call. */
function postNotice(t: Tables, notify: Notify): string {
  return `    IF b.nw IS NOT NULL THEN
      -- A notice to an owner that never takes it (it died) is dropped after a day.
      IF NOT pruned THEN
        DELETE FROM ${t.notices} WHERE at < prune_notices_before;
        pruned := true;
      END IF;
      INSERT INTO ${t.notices} (owner, execution_id, kind, at) VALUES (b.nw, b.i, b.nk, b.a1);
      ${notify(`json_build_object('kind', 'notice', 'owner', b.nw, 'executionId', b.i)`)};
    END IF;`;
}

/**
 * S7, S15, S18: the batch's timer rows as timer-plan.ts computed them (its own rows cleared but
 * never wake rows, rows deleted, rows set), and a wake per row set.
 */
function timerRows(t: Tables, channel: string): string {
  return `    IF b.tc THEN
      DELETE FROM ${t.timers} WHERE execution_id = b.i AND ${NOT_A_WAKE_ROW};
    END IF;
    IF b.td IS NOT NULL THEN
      DELETE FROM ${t.timers} AS tm USING json_to_recordset(b.td) AS d(e text, t text)
        WHERE tm.execution_id = d.e AND tm.timer_id = d.t;
    END IF;
    IF b.ts IS NOT NULL THEN
      -- In the order given: two calls writing one pair of rows in opposite orders may deadlock,
      -- and PostgreSQL aborts one of them, which runs again (db.ts D2).
      INSERT INTO ${t.timers} (execution_id, timer_id, wake_at)
        SELECT st.e, st.t, st.a FROM json_to_recordset(b.ts) AS st(e text, t text, a bigint)
        ON CONFLICT (execution_id, timer_id) DO UPDATE SET wake_at = excluded.wake_at;
      PERFORM pg_notify('${channel}', w) FROM (
          SELECT json_build_object('kind', 'timer', 'executionId', st.e, 'wakeAtMs', st.a)::text
          FROM json_to_recordset(b.ts) AS st(e text, t text, a bigint)
        ) AS wake(w)
        WHERE octet_length(w) <= ${MAX_PAYLOAD_BYTES};
    END IF;`;
}

/**
 * R14, S18: a batch that records a queued execution, ends one of a queue or releases its lease
 * wakes the queue's admitters. A new execution's queue is kept for the batches after it (R4).
 */
function queueWake(notify: Notify): string {
  return `    IF is_new AND b.qn IS NOT NULL THEN
      log_queue := b.qn;
      -- R13: the key is held for the batches after it in the call, once this one is accepted.
      IF b.qd IS NOT NULL THEN
        dedupe_keys := dedupe_keys || json_build_array(b.qn, b.qd)::text;
        dedupe_ids := dedupe_ids || b.i;
      END IF;
    END IF;
    IF NOT single THEN
      xqueues[j] := log_queue;
    END IF;
    IF log_queue IS NOT NULL AND ((is_new AND b.qn IS NOT NULL) OR b.r IS NOT NULL
        OR b.s IN (${quoted(TERMINAL_STATUSES)})) THEN
      ${notify(`json_build_object('kind', 'queue', 'queue', log_queue)`)};
    END IF;`;
}

/** S18: a batch that leaves its execution pending or running with no lease held wakes a claimer. */
function runnableWake(notify: Notify): string {
  return `    IF b.s IN ('pending', 'running') AND lease_owner IS NULL THEN
      ${notify(`json_build_object('kind', 'runnable', 'executionId', b.i)`)};
    END IF;`;
}
