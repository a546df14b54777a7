/**
 * The append's fast path (append.ts A6): the commonest call, one batch of one execution that is a
 * step, an end or a start, as ONE plain SQL statement (data-modifying CTEs), prepared per
 * connection, instead of a call of the PL/pgSQL routine, which runs 5-7 statements, each with its
 * own executor start-up. A batch the statement does not take (it answers no row, or fails on a
 * unique key) wrote nothing, and goes to the routine, which judges it anew and answers a refusal
 * as ever (append-routine.ts R5).
 *
 * F1. Only these shapes are sent here (`fastShape`): no snapshot, no notice, no fork row (S21), no
 *     timer rows but an end's clearing of its own; an advance (no claim) whose wake the statement need not send; a
 *     start (a claim at sequence 0, fence 1) that releases nothing. Everything else, and every
 *     call of several batches, is the routine's.
 * F2. An advance locks the lease row FOR UPDATE, filtered on the batch's fence, first; the UPDATE
 *     of the execution row runs only if that lease row was found (its gate), so the lease is
 *     locked before the execution row, as the routine (R2), a claim and a delete take them
 *     (append.ts A1). PostgreSQL re-checks a row that a concurrent transaction changed while this
 *     one waited on its latest version, both for the FOR UPDATE (the fence) and for the UPDATE
 *     (the head and status): so the fence and the sequence number are checked on what the
 *     previous holder committed, and of concurrent appends at one sequence number exactly one
 *     wins (S2, S3). The event rows, the release and the timers' clearing are written only if the
 *     UPDATE took the row; otherwise the statement wrote nothing.
 * F3. A start inserts the lease row (fence 1) only where neither a lease row nor an execution row
 *     exists, then the execution row and its events, plainly: an execution row or event that a
 *     concurrent transaction committed after this statement's snapshot fails it on its key
 *     (unique_violation), which rolls the whole statement back. A lease row being inserted
 *     concurrently makes this one wait for it; ON CONFLICT DO NOTHING then takes nothing.
 * F4. The runnable wake (S18, routine `runnableWake`) is never needed here: an advance that leaves
 *     the execution pending or running is taken only while its lease has an owner it does not
 *     release, and a start's lease has its claimer. Wakes of timers and notices never come here.
 * F5. Every table is qualified, every parameter cast to its exact type (so pg_catalog's operators
 *     match exactly, whatever the session's search_path holds: R7's reason), and the one function
 *     called is named as pg_catalog's.
 * F6. The lease row's `runnable` flag (append-routine.ts R9, leases.ts L4) follows the batch's
 *     status as the routine keeps it: a start's lease row is created with it, a release writes it
 *     in the same row version, and otherwise an advance writes it only where it changes (an end,
 *     a park, a wake; never a step that stays running), all in the statement that writes the
 *     status, on the lease row it locked first.
 * F7. The events are rows of the lean format (event-rows.ts E1..E4), as the routine writes them
 *     (R10): under the key that the UPDATE or INSERT of their execution row returns, so after it.
 * F8. A start writes its principal and what it carries as spent; an advance writes what was spent
 *     only when its batch carries it (a statement of its own, `_s`), as the routine does (R12).
 * F9. A batch with a queue entry is never sent here (F1: its columns and its dedupe check are the
 *     routine's, R13). An advance that ends an execution of a queue, or releases its lease, wakes
 *     the queue's admitters (R14) with `pg_notify` in its own statement's answer, read from the
 *     execution row it updated: so only when it is taken, and delivered on its commit (wakes.ts N1).
 */
import type pg from "pg";
import type { Envelope } from "../../kernel/events.ts";
import { TERMINAL_STATUSES } from "../../kernel/events.ts";
import { jsonText } from "../../kernel/json.ts";
import { NOT_A_WAKE_ROW } from "../rows.ts";
import type { AppendBatch } from "../spi.ts";
import { EVENT_INSERT_COLUMNS, SPENT_COLUMNS } from "./append-routine-writes.ts";
import { eventCells } from "./event-rows.ts";
import { pgCode, runRetried, statement, type Statement, type Tables } from "./db.ts";
import { RUNNABLE_SQL } from "./tables.ts";
import { MAX_PAYLOAD_BYTES } from "./wakes.ts";

/** What a batch of the fast path is (F1); undefined: the routine's. */
interface Shape {
  start: boolean;
  /** More than one event: sent as arrays. */
  many: boolean;
  release: boolean;
  /** An end's clearing of its own timer rows (timer-plan.ts T2). */
  clear: boolean;
  /** An advance that carries what was spent (F8); a start always writes its cells. */
  spent: boolean;
}

const RUNNABLE = ["pending", "running"];
const UNIQUE_VIOLATION = "23505";

const quoted = (values: Iterable<string>) => [...values].map((v) => `'${v}'`).join(", ");

/** F1: the batch's shape if the fast path takes it. */
export function fastShape(b: AppendBatch): Shape | undefined {
  // A queue entry (R13: its columns, its dedupe check) is the routine's to write.
  if (b.snapshot || b.notice || b.queue) return undefined;
  if (!Number.isSafeInteger(b.fence) || !Number.isSafeInteger(b.expectedSeq)) return undefined;
  let clear = false;
  const ix = b.index;
  if (ix) {
    // A fork's row (S21) is the routine's to write.
    if (ix.wakes?.length || ix.forkedFrom) return undefined;
    if (ix.clearAllTimers) clear = true;
    else if (ix.timersSet.length || ix.timersCleared.length) return undefined;
  }
  const release = b.releaseLease !== undefined;
  const many = b.events.length > 1;
  if (b.claimLease) {
    if (release || clear || b.expectedSeq !== 0 || b.fence !== 1) return undefined;
    return { start: true, many, release, clear, spent: true };
  }
  // F4: a release that may leave the execution runnable must wake a claimer: the routine does.
  if (release && RUNNABLE.includes(b.status)) return undefined;
  return { start: false, many, release, clear, spent: b.spent !== undefined };
}

/**
 * The events' insert of a batch, from the row `source` answers (its column `n`, the execution's
 * key: event-rows.ts E1), six parameters from `first` (`eventValues`, E2 and E3).
 */
function insertEvents(t: Tables, source: string, seq: string, first: number, many: boolean) {
  const types = ["smallint", "text", "bigint", "text", "integer", "text"];
  const [k, kn, at, p, f, m] = types.map((type, i) => `$${first + i}::${type}`);
  const into = `INSERT INTO ${t.events} (${EVENT_INSERT_COLUMNS})`;
  if (!many)
    return `${into} SELECT s.n, ${seq}, ${at}, ${f}, ${k}, ${kn}, ${p}, ${m} FROM ${source} s`;
  const arrays = [k, kn, at, p, f, m].map((x) => `pg_catalog.unnest(${x}[])`).join(", ");
  return `${into} SELECT s.n, ${seq} + ev.o - 1, ev.t, ev.f, ev.k, ev.kn, ev.p, ev.m
      FROM ${source} s, ROWS FROM (${arrays}) WITH ORDINALITY AS ev(k, kn, t, p, f, m, o)`;
}

/**
 * F2: $1 id, $2 fence, $3 status, $4 head, $5 updated_at, $6 expected sequence number, $7..$12
 * the events (kind code, kind name, at, payload, fence, meta: `eventValues`), $13 the released
 * owner, then (F8) what was spent: cost, cost unknown, tokens.
 */
function advanceSql(t: Tables, s: Shape, channel: string): string {
  const n = s.release ? 14 : 13;
  // F8: only a batch that carries it writes what was spent; a step without is the same statement.
  const spent = s.spent
    ? `, cost_usd = $${n}::float8, cost_unknown = $${n + 1}::boolean, tokens = $${n + 2}::float8`
    : "";
  // F4: without a release, a runnable status needs the lease's owner to stay.
  const gate = s.release
    ? ""
    : `WHERE $3::text NOT IN (${quoted(RUNNABLE)}) OR l.owner IS NOT NULL`;
  const parts = [
    `WITH lease AS (
       SELECT l.owner FROM ${t.leases} l WHERE l.execution_id = $1::text AND l.fence = $2::bigint
       FOR UPDATE
     ), advanced AS (
       UPDATE ${t.executions} AS x SET status = $3::text, head = $4::bigint, updated_at = $5::bigint${spent}
       WHERE x.id = $1::text AND x.head = $6::bigint - 1
         AND x.status NOT IN (${quoted(TERMINAL_STATUSES)})
         AND EXISTS (SELECT FROM lease l ${gate})
       RETURNING x.id, x.n, x.queue
     ), appended AS (
       ${insertEvents(t, "advanced", "$6::bigint", 7, s.many)}
     )`,
  ];
  // F6: one write of the lease row at most (a statement may not change a row twice).
  const runnable = `$3::text IN (${RUNNABLE_SQL})`;
  if (s.release) {
    parts.push(`, released AS (
       UPDATE ${t.leases} AS l
       SET owner = CASE WHEN l.owner = $13::text THEN NULL ELSE l.owner END, runnable = ${runnable}
       FROM advanced a
       WHERE l.execution_id = a.id
         AND (l.owner = $13::text OR l.runnable IS DISTINCT FROM ${runnable})
     )`);
  } else {
    parts.push(`, flagged AS (
       UPDATE ${t.leases} AS l SET runnable = ${runnable} FROM advanced a
       WHERE l.execution_id = a.id AND l.runnable IS DISTINCT FROM ${runnable}
     )`);
  }
  if (s.clear) {
    parts.push(`, cleared AS (
       DELETE FROM ${t.timers} AS tm USING advanced a
       WHERE tm.execution_id = a.id AND ${NOT_A_WAKE_ROW}
     )`);
  }
  parts.push(`SELECT 1 AS taken, ${queueWake(channel, s)} FROM advanced a`);
  return parts.join("\n");
}

/** F9: the queue's wake of an advance that ends or releases (the terminal test is on $3). */
function queueWake(channel: string, s: Shape): string {
  const freed = s.release ? "true" : `$3::text IN (${quoted(TERMINAL_STATUSES)})`;
  const wake = `pg_catalog.json_build_object('kind', 'queue', 'queue', a.queue)::text`;
  return `CASE WHEN a.queue IS NOT NULL AND ${freed}
       AND pg_catalog.octet_length(${wake}) <= ${MAX_PAYLOAD_BYTES}
     THEN pg_catalog.pg_notify('${channel}', ${wake}) END AS woke`;
}

/**
 * F3: $1 id, $2 owner, $3 expiry, $4 flow, $5 status, $6 head, $7 created_at, $8 updated_at,
 * $9..$14 the events (kind code, kind name, at, payload, fence, meta: `eventValues`), $15 the
 * principal, $16..$18 what was spent (F8: cost, cost unknown, tokens).
 */
function startSql(t: Tables, s: Shape): string {
  return `WITH claimed AS (
       INSERT INTO ${t.leases} (execution_id, owner, fence, expires_at, runnable)
       SELECT $1::text, $2::text, 1, $3::bigint, $5::text IN (${RUNNABLE_SQL})
       WHERE NOT EXISTS (SELECT FROM ${t.executions} x WHERE x.id = $1::text)
       ON CONFLICT (execution_id) DO NOTHING
       RETURNING execution_id AS id
     ), created AS (
       INSERT INTO ${t.executions} (id, flow, status, head, created_at, updated_at, ${SPENT_COLUMNS})
       SELECT c.id, $4::text, $5::text, $6::bigint, $7::bigint, $8::bigint, $15::text,
         $16::float8, $17::boolean, $18::float8 FROM claimed c
       RETURNING id, n
     ), appended AS (
       ${insertEvents(t, "created", "0::bigint", 9, s.many)}
     )
     SELECT 1 AS taken FROM created`;
}

/** The statement's text for a batch of shape `s` (exported for tests' EXPLAIN). */
export function fastSql(t: Tables, s: Shape, channel: string): string {
  return s.start ? startSql(t, s) : advanceSql(t, s, channel);
}

/** The batch's events as the statement's parameters (one each, or arrays: `many`; E2, E3). */
function eventValues(events: readonly Envelope[], many: boolean): unknown[] {
  const cells = events.map((e) => {
    const c = eventCells(e.kind, e.meta);
    return [c.k ?? null, c.kn ?? null, e.at, jsonText(e.payload), c.f ?? null, c.m];
  });
  if (!many) return cells[0] ?? [];
  return [0, 1, 2, 3, 4, 5].map((i) => cells.map((c) => c[i]));
}

/** The fast path's statements, each prepared (per connection) the first time it is used. */
export function fastAppender(
  pool: pg.Pool,
  t: Tables,
  channel: string,
): (b: AppendBatch, s: Shape) => Promise<boolean> {
  const prepared = new Map<string, Statement>();
  const of = (s: Shape): Statement => {
    const name = `append_${s.start ? "start" : "advance"}${s.many ? "_n" : ""}${s.release ? "_r" : ""}${s.clear ? "_c" : ""}${s.spent && !s.start ? "_s" : ""}`;
    let st = prepared.get(name);
    if (!st) {
      st = statement(name, fastSql(t, s, channel));
      prepared.set(name, st);
    }
    return st;
  };
  /** Whether the statement took the batch (F2, F3); false: it wrote nothing. */
  return async (b, s) => {
    const first = b.events[0] as Envelope;
    const last = b.events[b.events.length - 1] as Envelope;
    const events = eventValues(b.events, s.many);
    const c = b.claimLease;
    const values: unknown[] = c
      ? [b.executionId, c.owner, c.expiresAtMs, b.flow ?? "", b.status, last.seq, first.at, last.at]
      : [b.executionId, b.fence, b.status, last.seq, last.at, b.expectedSeq];
    values.push(...events);
    if (s.release && !c) values.push(b.releaseLease);
    if (c) values.push(b.principal ?? null);
    if (s.spent) {
      const spent = b.spent;
      values.push(spent?.costUsd ?? null, spent?.costUnknown ?? null, spent?.tokens ?? null);
    }
    try {
      const result = await runRetried(pool, of(s)(values));
      return result.rows.length > 0;
    } catch (e) {
      // F3: a row committed meanwhile; the statement rolled back whole.
      if (pgCode(e) === UNIQUE_VIOLATION) return false;
      throw e;
    }
  };
}
