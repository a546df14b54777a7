/**
 * `appendMany` on PostgreSQL: group commit (S4), each batch checked and applied on its own, in one
 * transaction that is one statement, a call of the append routine (append-routine.ts R1..R8), or,
 * for one batch of a common shape, the fast path's statement (A6).
 *
 * A1. The routine first locks, FOR UPDATE and sorted by execution id, the lease rows and then the
 *     execution rows of every execution in the call (a call for one execution, the lease row and
 *     then the execution row). Everything else that takes both (a delete, a claim, an append of
 *     the previous release) takes them in the same order or skips locked rows, so group commits
 *     never deadlock on them (a deadlock elsewhere, on timer rows, rolls back and runs again:
 *     db.ts D2).
 * A2. The execution rows are read after the leases are locked, in a statement of their own, so
 *     they show whatever the previous holder of a lease committed: of concurrent appends at one
 *     sequence number exactly one wins (S2), the fence and the sequence number are checked in the
 *     transaction that inserts (S3), and a claim (S9) that finds no lease row creates it with
 *     INSERT ... ON CONFLICT DO NOTHING, the loser of a race being fenced.
 * A3. What the client can judge alone it judges before sending, as the other stores do: a batch
 *     that is empty, not dense from its expected sequence number, or holds a value PostgreSQL
 *     cannot store (a NUL character, a time that is no safe integer) is refused with
 *     InvalidInputError and not sent, and refuses no other (S4). A call whose batches are all
 *     refused so costs no round trip.
 * A4. The call is one statement in autocommit: one round trip, and PostgreSQL commits it (and
 *     delivers its wakes, S18) before it answers. Only when a test hook must run between the
 *     writes and the commit (`StoreHooks.beforeCommit`) is it wrapped in BEGIN ... COMMIT.
 * A5. The batches travel as one JSON text, whose strings PostgreSQL reads back exactly, except a
 *     lone UTF-16 surrogate, which its json type refuses: those are sent as U+FFFD, what the
 *     driver's UTF-8 encoding makes of them in any other parameter. Payloads and metas are JSON
 *     text already (well-formed: JSON.stringify escapes lone surrogates), sent as JSON strings.
 * A6. A call whose one batch (after A3) is a step, an end or a start of a common shape goes first
 *     to the fast path (append-fast.ts F1..F5): one plain prepared statement that takes the same
 *     locks in the same order (A1) and checks the same things on the rows' latest versions (A2),
 *     at about half the server's CPU of the routine. What it does not take it wrote nothing of,
 *     and the call goes on to the routine as any other, which judges it anew (a refusal costs a
 *     second round trip). Its parameters are plain text, which the driver's UTF-8 encoding
 *     makes well-formed as A5 says.
 */
import type pg from "pg";
import type { Envelope } from "../../kernel/events.ts";
import {
  FencedError,
  InvalidInputError,
  InvariantViolation,
  LoomError,
  ensureError,
} from "../../kernel/errors.ts";
import { jsonText } from "../../kernel/json.ts";
import { checkBatch, effectiveFence } from "../append-check.ts";
import { duplicateError } from "../queue-admit.ts";
import type { AppendBatch, AppendOutcome, StoreHooks } from "../spi.ts";
import { runRetried, statement, transaction, type Tables } from "./db.ts";
import { eventCells, type EventCells } from "./event-rows.ts";
import { TimerPlan } from "./timer-plan.ts";
import { fastAppender, fastShape } from "./append-fast.ts";

const NOTICE_TTL_MS = 24 * 60 * 60 * 1000;

/** One batch as the routine reads it (append-routine.ts `appendRoutineSql` names the fields). */
interface SentBatch {
  i: string;
  /** Where `i` is in the call's ids, from 1. */
  j: number;
  x: number;
  f: number;
  s: string;
  fl?: string;
  h: number;
  a0: number;
  a1: number;
  /** Each event's seq, time and payload text, with its kind and meta cells (R10). */
  e: ({ q: number; t: number; p: string } & EventCells)[];
  co?: string;
  ce?: number;
  r?: string;
  ss?: number;
  sj?: string;
  nw?: string;
  nk?: string;
  tc?: true;
  td?: { e: string; t: string }[];
  ts?: { e: string; t: string; a: number }[];
  /** A fork's origin and fork point (S21). */
  fo?: string;
  fp?: number;
  pr?: string;
  sp?: true;
  sc?: number;
  su?: true;
  st?: number;
  /** Its queue entry (R13): name, key, priority, dedupe, not-before. */
  qn?: string;
  qk?: string;
  qp?: number;
  qd?: string;
  qb?: number;
}

/** A batch the routine refused (R5): its place in the call, and what it was checked against. */
interface Refusal {
  n: number;
  h?: number;
  s?: AppendBatch["status"] | null;
  f?: number | null;
  c?: true;
  /** S27: the queued execution that holds the batch's dedupe key (R13). */
  d?: string;
}

/** The routine's answer (pg parses json). */
interface Answer {
  refused: Refusal[] | null;
}

export function postgresAppend(
  pool: pg.Pool,
  t: Tables,
  channel: string,
  hooks: StoreHooks,
): (batches: readonly AppendBatch[]) => Promise<AppendOutcome[]> {
  // The tables it names are in the text so that pg_stat_activity shows what a waiting call is
  // about (the routine's own statements do not show there).
  const call = statement(
    "append_routine",
    `SELECT ${t.appendRoutine}($1::text[], $2::json, $3::bigint) AS refused
     /* locks and writes ${t.leases}, ${t.executions}, ${t.events}, ${t.snapshots},
        ${t.notices}, ${t.timers}, ${t.forks} */`,
  );

  const fast = fastAppender(pool, t, channel);

  return async (batches) => {
    const outcomes: AppendOutcome[] = batches.map(() => ({ ok: true }));
    /** The batches to send, and where each is in `batches`. */
    const checked: { at: number; batch: AppendBatch }[] = [];
    for (const [at, b] of batches.entries()) {
      try {
        // A3
        assertStorable(b);
        precheck(b);
        checked.push({ at, batch: b });
      } catch (e) {
        if (!(e instanceof LoomError)) throw e;
        outcomes[at] = { ok: false, error: e };
      }
    }
    // A6: one batch of a common shape is one plain statement; what it does not take, the routine
    // judges anew.
    const only = checked.length === 1 && !hooks.beforeCommit ? checked[0]?.batch : undefined;
    const shape = only && fastShape(only);
    if (only && shape && (await fast(only, shape).catch((e: unknown) => throwLoom(e)))) {
      return outcomes;
    }
    let pruneBeforeMs: number | null = null;
    const sent = checked.map(({ at, batch }) => {
      const row = toSent(batch);
      if (batch.notice) {
        pruneBeforeMs = Math.max(pruneBeforeMs ?? -Infinity, row.a1 - NOTICE_TTL_MS);
      }
      return { at, batch, row };
    });
    const ids = new Map<string, number>();
    for (const { row } of sent) {
      row.j = ids.get(row.i) ?? ids.set(row.i, ids.size + 1).size;
    }
    const query =
      sent.length === 0
        ? undefined
        : call([[...ids.keys()], JSON.stringify(sent.map((x) => x.row)), pruneBeforeMs]);
    let refusals: Refusal[] = [];
    try {
      const hook = hooks.beforeCommit;
      if (hook) {
        // A4: only a test hook needs the commit to be a statement of its own.
        refusals = await transaction(pool, async (tx) => {
          const answer = query ? refusalsOf(await tx.query<Answer>(query)) : [];
          hook(batches);
          return answer;
        });
      } else if (query) {
        refusals = refusalsOf(await runRetried<Answer>(pool, query));
      }
    } catch (e) {
      throwLoom(e);
    }
    for (const r of refusals) {
      const x = sent[r.n];
      if (!x) throw new InvariantViolation(`the append routine refused batch ${r.n} of none`);
      outcomes[x.at] = { ok: false, error: refusalError(x.batch, r) };
    }
    return outcomes;
  };
}

function throwLoom(e: unknown): never {
  throw ensureError(e);
}

function refusalsOf(result: pg.QueryResult<Answer>): Refusal[] {
  const refused = result.rows[0]?.refused;
  if (!Array.isArray(refused)) {
    throw new InvariantViolation("the append routine answered no list of refusals");
  }
  return refused;
}

/** The typed error that refuses `b`, from what the routine checked it against (R5). */
function refusalError(b: AppendBatch, r: Refusal): LoomError {
  const id = b.executionId;
  if (r.d !== undefined && b.queue) return duplicateError(id, b.queue, r.d);
  if (r.c) {
    return new FencedError(
      `append to ${id} with fence ${b.fence} refused: another owner created its lease meanwhile`,
      { executionId: id, fence: b.fence, leaseFence: null },
    );
  }
  try {
    checkBatch(b, r.h ?? -1, effectiveFence(b, r.f ?? undefined), r.s ?? undefined);
  } catch (e) {
    if (e instanceof LoomError) return e;
    throw e;
  }
  throw new InvariantViolation(
    `the append routine refused a batch for ${id} that its checks accept`,
    { executionId: id, refusal: JSON.stringify(r) },
  );
}

/**
 * A3: checkBatch's checks of the batch alone (empty, not dense). The lease and the log are the
 * routine's to judge, so a refusal on those grounds here (the stand-ins below) is not one.
 */
function precheck(b: AppendBatch): void {
  try {
    checkBatch(b, b.expectedSeq - 1, b.fence);
  } catch (e) {
    if (e instanceof InvalidInputError) throw e;
  }
}

function toSent(b: AppendBatch): SentBatch {
  const first = b.events[0] as Envelope;
  const last = b.events[b.events.length - 1] as Envelope;
  const row: SentBatch = {
    i: wellFormed(b.executionId),
    j: 0,
    x: b.expectedSeq,
    f: b.fence,
    s: wellFormed(b.status),
    h: last.seq,
    a0: first.at,
    a1: last.at,
    e: b.events.map((e) => ({
      q: e.seq,
      t: e.at,
      p: jsonText(e.payload),
      ...eventCells(wellFormed(e.kind), e.meta),
    })),
  };
  if (b.flow !== undefined) row.fl = wellFormed(b.flow);
  if (b.principal !== undefined) row.pr = wellFormed(b.principal);
  if (b.spent) {
    row.sp = true;
    if (b.spent.costUsd !== undefined) row.sc = b.spent.costUsd;
    if (b.spent.costUnknown) row.su = true;
    if (b.spent.tokens !== undefined) row.st = b.spent.tokens;
  }
  if (b.queue) {
    row.qn = wellFormed(b.queue.name);
    if (b.queue.key !== undefined) row.qk = wellFormed(b.queue.key);
    row.qp = b.queue.priority;
    if (b.queue.dedupe !== undefined) row.qd = wellFormed(b.queue.dedupe);
    if (b.queue.notBeforeMs !== undefined) row.qb = b.queue.notBeforeMs;
  }
  if (b.claimLease) {
    row.co = wellFormed(b.claimLease.owner);
    row.ce = b.claimLease.expiresAtMs;
  }
  if (b.releaseLease !== undefined) row.r = wellFormed(b.releaseLease);
  if (b.snapshot) {
    row.ss = b.snapshot.seq;
    row.sj = wellFormed(b.snapshot.stateJson);
  }
  if (b.notice) {
    row.nw = wellFormed(b.notice.owner);
    row.nk = wellFormed(b.notice.kind);
  }
  if (b.index?.forkedFrom) {
    row.fo = wellFormed(b.index.forkedFrom.executionId);
    row.fp = b.index.forkedFrom.seq;
  }
  if (b.index) {
    // The batch's net effect on timer rows, deduplicated (T1..T3).
    const timers = new TimerPlan();
    timers.add(b);
    if (timers.clearedAll.size) row.tc = true;
    const { deleted, set } = timers;
    if (deleted.length) {
      row.td = deleted.map((d) => ({ e: wellFormed(d.executionId), t: wellFormed(d.timerId) }));
    }
    if (set.length) {
      row.ts = set.map((x) => ({
        e: wellFormed(x.executionId),
        t: wellFormed(x.timerId),
        a: x.wakeAtMs,
      }));
    }
  }
  return row;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** A5: a lone surrogate as U+FFFD, as UTF-8 encoding would make it. */
function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, "\ufffd");
}

/**
 * What PostgreSQL could not store, refused per batch (InvalidInputError) before it could fail
 * the whole group: a NUL character in a text column, a time that is no safe integer.
 */
function assertStorable(b: AppendBatch): void {
  const texts: (string | undefined)[] = [
    b.executionId,
    b.flow,
    b.principal,
    b.status,
    b.releaseLease,
    b.claimLease?.owner,
    b.notice?.owner,
    b.notice?.kind,
    b.snapshot?.stateJson,
    ...b.events.map((e) => e.kind),
    ...(b.index?.timersCleared ?? []),
    ...(b.index?.timersSet ?? []).map((x) => x.timerId),
    ...(b.index?.wakes ?? []).flatMap((x) => [x.executionId, x.timerId]),
    b.index?.forkedFrom?.executionId,
    b.queue?.name,
    b.queue?.key,
    b.queue?.dedupe,
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
