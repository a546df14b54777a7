/**
 * The rows the SQL stores (SQLite, PostgreSQL) keep, and what they read back as: one shape, one
 * mapping, whichever engine holds them. Payloads, metas and inputs are kept as the JSON text the
 * runtime made, so what is read is what was appended. Event rows have a format per store
 * (sqlite/row-codec.ts, postgres/event-rows.ts), both read back as the envelope appended.
 */
import type { Envelope, EnvelopeMeta, EventKind, ExecutionStatus } from "../kernel/events.ts";
import { LogCorruptError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { ExecutionSummary, InboxMessage, Member, Schedule } from "./spi.ts";
import { WAKE_ID_PREFIXES } from "../fold/index-changes.ts";

/** SQL: a timer row an execution's own end clears, not a wake row (S15; isWakeId). */
export const NOT_A_WAKE_ROW = WAKE_ID_PREFIXES.map((p) => `timer_id NOT LIKE '${p}%'`).join(
  " AND ",
);

export interface ExecutionRow {
  id: string;
  flow: string;
  status: string;
  head: number;
  created_at: number;
  updated_at: number;
  /** S24 (both SQL stores read them back as these). */
  principal: string | null;
  cost_usd: number | null;
  cost_unknown: boolean | number | null;
  tokens: number | string | null;
  /** The queue it was recorded in (spi-queues.ts), or null. */
  queue: string | null;
}

/** SQL: the S24 columns an execution row is listed with. */
export const SPENT_COLUMNS = "principal, cost_usd, cost_unknown, tokens";

/** SQL: every column an execution row is listed with besides its id, flow, status and times. */
export const LISTED_COLUMNS = `${SPENT_COLUMNS}, queue`;

export interface ScheduleRow {
  name: string;
  flow: string;
  cron: string;
  timezone: string;
  input: string | null;
  from_ms: number;
  cursor_ms: number;
  /** S23: an integer on SQLite, a boolean on PostgreSQL. */
  paused: number | boolean;
}

/** A member's row (S22): its flows as a JSON array. */
export interface MemberRow {
  owner: string;
  flows: string;
  started_at: number;
  heartbeat_at: number;
  host: string | null;
  pid: number | null;
}

export interface MessageRow {
  seq: number;
  topic: string;
  key: string;
  payload: string;
  at: number;
}

/**
 * Stored JSON text of `executionId` at `seq` (an event's payload or meta, a snapshot's state),
 * parsed; text that no longer parses is LogCorruptError naming both (issue 21 item 3).
 */
export function parsedRow(executionId: string, seq: number, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new LogCorruptError(
      `the log of execution ${JSON.stringify(executionId)} cannot be read at seq ${seq}: ${why}`,
      { executionId, seq },
    );
  }
}

export function summaryOf(r: ExecutionRow): ExecutionSummary {
  const x: ExecutionSummary = {
    executionId: r.id,
    flow: r.flow,
    status: r.status as ExecutionStatus,
    head: r.head,
    createdAtMs: r.created_at,
    updatedAtMs: r.updated_at,
  };
  if (r.principal !== null) x.principal = r.principal;
  if (r.cost_usd !== null) x.costUsd = r.cost_usd;
  // SQLite keeps a boolean as 1, PostgreSQL's driver reads true.
  if (r.cost_unknown === true || r.cost_unknown === 1) x.costUnknown = true;
  // PostgreSQL's bigint reads as text.
  if (r.tokens !== null) x.tokens = Number(r.tokens);
  if (r.queue !== null) x.queue = r.queue;
  return x;
}

export function scheduleOf(r: ScheduleRow): Schedule {
  const schedule: Schedule = {
    name: r.name,
    flow: r.flow,
    cron: r.cron,
    timezone: r.timezone,
    fromMs: r.from_ms,
    cursorMs: r.cursor_ms,
    paused: r.paused === true || r.paused === 1,
  };
  if (r.input !== null) schedule.input = JSON.parse(r.input) as Json;
  return schedule;
}

export function memberOf(r: MemberRow): Member {
  const flows: unknown = JSON.parse(r.flows);
  const member: Member = {
    owner: r.owner,
    flows: Array.isArray(flows) ? flows.filter((f): f is string => typeof f === "string") : [],
    startedAtMs: r.started_at,
    lastHeartbeatMs: r.heartbeat_at,
  };
  if (r.host !== null) member.host = r.host;
  if (r.pid !== null) member.pid = r.pid;
  return member;
}

export function messageOf(chainId: string, r: MessageRow): InboxMessage {
  return {
    chainId,
    seq: r.seq,
    topic: r.topic,
    key: r.key,
    payload: JSON.parse(r.payload) as Json,
    atMs: r.at,
  };
}

/** An event row's cells as both SQL stores decode them (row-codec.ts C1..C3, event-rows.ts E1..E3). */
export interface EventCells {
  seq: number;
  /** The kind its code or name gives; undefined when the row's code names none. */
  kind: string | undefined;
  /** The row's kind cell as stored, named in the error when `kind` is undefined. */
  storedKind: unknown;
  at: number;
  payload: string;
  /** A bare fence (the meta was exactly `{ fence }`), or null. */
  fence: number | null;
  /** The meta's JSON text when it is not a bare fence, or null. */
  meta: string | null;
}

/** The envelope of `executionId` that `c` holds; a kind code no kind has is LogCorruptError. */
export function envelopeOfCells(executionId: string, c: EventCells): Envelope {
  if (c.kind === undefined) {
    throw new LogCorruptError(
      `the log of execution ${JSON.stringify(executionId)} cannot be read at seq ${c.seq}: unknown kind code ${String(c.storedKind)}`,
      { executionId, seq: c.seq },
    );
  }
  const e: Envelope = {
    executionId,
    seq: c.seq,
    kind: c.kind as EventKind,
    at: c.at,
    payload: parsedRow(executionId, c.seq, c.payload) as Json,
  };
  if (c.fence !== null) e.meta = { fence: c.fence };
  else if (c.meta !== null) e.meta = parsedRow(executionId, c.seq, c.meta) as EnvelopeMeta;
  return e;
}
